"""The report of one job (Phase 6): results statistics, samples, anomalies, attempts and
their causes, GPU-hours and cost, estimate versus actual, the closing line and next steps.

Built only from the store and the job's local results folder; a plain dict (``--json``),
rendered for the terminal and as Markdown by :mod:`runjob_core.reporting.render`. Next
steps are advice: the report never changes a parameter of the job.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from runjob_core.collecting import manifest as _results_folder
from runjob_core.collecting import results_folder
from runjob_core.models import ARTIFACT_HUB, ARTIFACT_PROBLEM, ARTIFACT_VALIDATION, ARTIFACT_VERIFIED
from runjob_core.reporting import results as results_mod

ACTIVE = ("SUBMITTING", "PENDING", "RUNNING", "REQUEUED", "CANCELLING")
#: Events that are anomalies by themselves.
_BAD_EVENTS = ("resume_refused", "rejected", "submit_failed", "collect_failed", "resume_failed", "dashboard_failed")
#: Metric series taken as the job's own peak-memory report (GiB unless named ``*_mb``).
PEAK_MEMORY_SERIES = ("peak_memory_gb", "max_memory_allocated_gb", "peak_mem_gb", "max_rss_gb", "peak_memory_mb")
#: Binary scores with at least this share of zeros are flagged (often a broken answer extractor).
MOSTLY_ZERO = 0.8
CLOSING = "Job complete. Artifacts at HF: {repo}@{revision}. Dashboard synced."


def build_report(store, row, *, clusters: dict | None = None, results_dir: Path | None = None,
                 now: float | None = None, cache: dict | None = None, events: list | None = None,
                 attempts: list | None = None, metrics: list | None = None, artifacts: list | None = None,
                 hook=None) -> dict[str, Any]:
    """The report of *row*. *clusters* (name -> ClusterConfig) gives GPU-hour prices where
    a cluster's ``settings.gpu_hour_cost`` sets one; *cache* (a dict kept by the caller)
    spares re-reading results files that did not change (the dashboard rebuilds often);
    *hook* (``pm.hook``) lets plugins' results readers read the folder too. *events*,
    *attempts*, *metrics* (every series, as :meth:`Store.metrics` orders them) and *artifacts*,
    when given, are the job's rows read already (the dashboard reads a thousand jobs' in four
    queries): nothing of them is read again."""
    now = time.time() if now is None else now
    attempts = store.attempts(row.id) if attempts is None else attempts
    events = store.events(row.id) if events is None else events
    artifacts = store.artifacts(row.id) if artifacts is None else artifacts
    spec = _spec(row, cache)
    max_tokens = spec.model.max_tokens if spec else None
    # Only what was collected for this job: a namesake's results are never this job's rows.
    dest = results_dir or _results_folder.folder_of(results_folder(row), row.id)
    elsewhere = None if dest is not None else _collected_elsewhere(row, events)
    if dest is None and elsewhere is not None and elsewhere["reachable"]:
        dest = Path(elsewhere["path"])  # another host's folder this host sees (the same machine, a shared filesystem)
    elif dest is None and elsewhere is not None and hook is not None and spec is not None:
        dest = _fetch_published(row, spec, artifacts, elsewhere, hook)  # out of reach: a published copy (the Hub)
    if dest is None:
        summary, samples = results_mod.summarise([], max_tokens=max_tokens), []
        summary.update(folder=None, files=[], unparsable_lines=0)
    else:
        summary, samples = results_summary(dest, max_tokens, cache, job=spec, hook=hook)
    latest = attempts[-1] if attempts else None
    state = latest.state if latest else row.state
    if elsewhere is not None:
        summary["collected_on"] = elsewhere  # where a member collected them (shown when not read from here)
    report: dict[str, Any] = {
        "job": {"id": row.id, "name": row.name, "kind": row.kind, "cluster": row.cluster, "backend": row.backend,
                "state": state, "outcome": row.outcome, "spec_hash": row.spec_hash, "spec_path": row.spec_path,
                "created_at": row.created_at},
        "attempts": _attempts(attempts, events),
        "results": summary,
        "tasks": summary.get("tasks", {}),
        "samples": samples,
        "resources": _resources(store, row, spec, attempts, clusters or {}, now),
        "artifacts": [{"name": a.name, "kind": a.kind, "location": a.location, "rows": a.rows, "source": a.source,
                       "attempt": a.attempt} for a in artifacts if a.kind != "problem"],
        # The code each attempt ran (the workdir's content hash), when the job has a workdir.
        "code": [{"attempt": e.attempt, "hash": e.data.get("code_hash"), "files": len(e.data.get("files") or {})}
                 for e in events if e.kind == "code"],
    }
    from runjob_core.gpu import telemetry as gpu_telemetry
    from runjob_core.reporting import training

    report["training"] = training.section(spec, attempts, events, store.metrics(row.id, series=("loss",))
                                          if metrics is None else [m for m in metrics if m[1] == "loss"])
    # GPU telemetry (utilisation, memory, idle GPU-hours): None when the job sampled none.
    report["gpu"] = gpu_telemetry.usage(store.metrics(row.id) if metrics is None else metrics)
    report["anomalies"] = _anomalies(events, artifacts, summary, report["attempts"]) + _reference_anomalies(spec, summary, cache)
    report["estimate"] = _estimate_vs_actual(store, row, spec, events, artifacts, report["resources"], metrics)
    if report["gpu"] and "gpu_peak_gib" not in report["estimate"]:
        # No log or collect measured the GPU peak: the telemetry did (the whole card, as nvidia-smi sees it).
        report["estimate"].update(gpu_peak_gib=round(report["gpu"]["peak_memory_mib"] / 1024, 3),
                                  gpu_peak_source="nvidia-smi telemetry")
    if row.kind == "canary":
        report["go_no_go"] = _go_no_go(state, report["anomalies"], summary)
    report["closing"] = _closing(row, spec, state, events, artifacts)
    report["next_steps"] = _next_steps(row, spec, state, report)
    report["next_step"] = report["next_steps"][0]
    return report


def results_summary(dest: Path, max_tokens: int | None, cache: dict | None = None, *, job=None,
                    hook=None) -> tuple[dict, list]:
    """Statistics and samples of the results in *dest*: a results reader's rows when one
    recognises the folder (lm-eval's samples; their aggregate scores under ``tasks``), else
    every JSONL row. *hook* is ``pm.hook`` (plugins' readers too); without it, the built-in ones."""
    from runjob_core import readers

    files = sorted(p for p in dest.rglob("*.json*") if p.suffix in (".json", ".jsonl")) if dest.is_dir() else []
    # A string key: the dashboard keeps these summaries on disk between processes.
    signature = json.dumps([str(dest), max_tokens, [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]])
    if cache is not None and signature in cache:
        summary, samples = cache[signature]
        return summary, samples
    table = readers.read(dest, job, hook)
    if table is not None:
        rows, names, bad = list(table.rows), [str(dest / name) for name in table.files], 0
    else:
        rows, names, bad = results_mod.load_rows(dest)
    summary = results_mod.summarise(rows, max_tokens=max_tokens)
    summary.update(folder=str(dest), files=names, unparsable_lines=bad)
    if table is not None:
        summary.update(reader=table.reader, tasks=table.tasks)
    found = (summary, results_mod.samples(rows, summary, max_tokens=max_tokens))
    if cache is not None:
        cache[signature] = found
    return found


def _spec(row, cache: dict | None = None):
    from cattrs.errors import BaseValidationError

    from runjob_core.errors import RunjobError

    key = ("spec", row.spec_json)
    if cache is not None and key in cache:
        return cache[key]
    try:
        spec = row.spec
    except (RunjobError, ValueError, BaseValidationError):  # a spec another runjob version stored: report without it
        spec = None
    if cache is not None:
        cache[key] = spec
    return spec


def hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


# ------------------------------------------------------------------ attempts


def _attempts(attempts, events) -> list[dict[str, Any]]:
    resumes = {e.attempt: e.message for e in events if e.kind == "resuming"}
    refusals = {e.attempt: e.message for e in events if e.kind == "resume_refused"}
    errors: dict[int | None, list[str]] = {}
    for event in events:
        if event.kind == "finding" and event.data.get("severity") == "error":
            errors.setdefault(event.attempt, []).append(event.data.get("label") or event.message)
    out = []
    for a in attempts:
        ended = a.state + (f" ({a.reason})" if a.reason else "")
        if a.exit_code not in (None, 0):
            ended += f", exit code {a.exit_code}"
        if errors.get(a.n):
            ended += "; findings: " + ", ".join(dict.fromkeys(errors[a.n]))
        run = (a.ended_at or time.time()) - a.started_at if a.started_at is not None else None
        out.append({"n": a.n, "backend_job_id": a.backend_job_id, "state": a.state, "exit_code": a.exit_code,
                    "reason": a.reason, "submitted_at": a.submitted_at, "started_at": a.started_at, "ended_at": a.ended_at,
                    "run_seconds": round(run, 3) if run is not None else None, "resumed_from": a.resumed_from,
                    "step": a.step, "rows_done": a.rows_done, "cause": ended,
                    "then": resumes.get(a.n) or refusals.get(a.n)})
    return out


# ------------------------------------------------------------------ resources


def usage(store, row, *, clusters: dict, now: float | None = None) -> dict[str, Any]:
    """GPU-hours and cost of *row* (the report's ``resources``), without the rest of the report."""
    return _resources(store, row, _spec(row), store.attempts(row.id), clusters, time.time() if now is None else now)


def _resources(store, row, spec, attempts, clusters, now: float) -> dict[str, Any]:
    gpus = (spec.resources.gpus * max(1, spec.resources.nodes)) if spec else 0
    seconds = sum(((a.ended_at or now) - a.started_at) for a in attempts if a.started_at is not None)
    gpu_hours = round(gpus * seconds / 3600, 4)
    price = None
    cluster = clusters.get(row.cluster)
    if cluster is not None:
        value = cluster.settings.get("gpu_hour_cost")
        price = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    cost = None
    if price is not None:
        cost = round(gpu_hours * price, 2)
    else:  # a backend that rents machines may say what one costs per hour (RunPod: usd_per_hour)
        hourly = [(a, float(rate)) for a in attempts if a.started_at is not None
                  and _is_number(rate := _hourly(_extra(a.submission_json)))]
        if hourly:
            cost = round(sum(((a.ended_at or now) - a.started_at) / 3600 * rate for a, rate in hourly), 2)
    return {"gpus": gpus, "run_seconds": round(seconds, 3), "gpu_hours": gpu_hours, "gpu_hour_cost": price, "cost": cost}


def _extra(submission_json: str | None) -> dict:
    """Submission.extra without structuring the whole record (the dashboard reads thousands)."""
    import json

    try:
        extra = json.loads(submission_json or "{}").get("extra")
    except (ValueError, AttributeError):
        return {}
    return extra if isinstance(extra, dict) else {}


def _hourly(extra: dict) -> Any:
    """A rented machine's price per hour from its submission's extra (RunPod writes
    ``usd_per_hour``; ``cost_per_hour`` is the older name)."""
    return extra.get("usd_per_hour", extra.get("cost_per_hour"))


def _is_number(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _estimate_vs_actual(store, row, spec, events, artifacts, resources, metrics: list | None = None) -> dict[str, Any]:
    from runjob_core.config import parse_duration

    out: dict[str, Any] = {"actual_walltime": hms(resources["run_seconds"]), "actual_seconds": resources["run_seconds"]}
    if spec and spec.resources.time:
        out["requested_walltime"] = spec.resources.time
        try:
            out["requested_seconds"] = parse_duration(spec.resources.time)
        except ValueError:
            pass
    for event in events:
        if event.kind == "estimates":
            for item in event.data.get("estimates", []):
                data = item.get("data") or {}
                if data.get("walltime"):
                    out["estimated_walltime"] = data["walltime"]
                if _is_number(data.get("total_gib")):  # the memory estimator's peak per GPU
                    out["estimated_memory_gib"] = float(data["total_gib"])
                out.setdefault("summaries", []).append(f"{item.get('source')}: {item.get('summary')}")
    peaks = {}
    for _n, series, _step, _ts, value in (store.metrics(row.id, series=PEAK_MEMORY_SERIES) if metrics is None
                                          else [m for m in metrics if m[1] in PEAK_MEMORY_SERIES]):
        if series in PEAK_MEMORY_SERIES:
            gib = value / 1024 if series.endswith("_mb") else value
            peaks[series] = max(peaks.get(series, gib), gib)
    if peaks:
        out["peak_memory_gib"] = round(max(peaks.values()), 3)
        out["peak_memory_source"] = "the job's own report (" + ", ".join(sorted(peaks)) + ")"
    # The measured-memory artifact of a collect (SLURM: sacct MaxRSS, and the GPU peak the log shows).
    for artifact in (a for a in artifacts if a.kind == "memory"):
        data = artifact.data
        if _is_number(data.get("max_rss_gib")):  # the scheduler's own account wins over the job's report
            out["peak_memory_gib"] = float(data["max_rss_gib"])
            out["peak_memory_source"] = "sacct MaxRSS"
        if _is_number(data.get("gpu_peak_gib")):
            out["gpu_peak_gib"] = float(data["gpu_peak_gib"])
            out["gpu_peak_source"] = str(data.get("gpu_peak_from") or artifact.source)
        if _is_number(data.get("estimate_total_gib")) and "estimated_memory_gib" not in out:
            out["estimated_memory_gib"] = float(data["estimate_total_gib"])
    if spec and spec.resources.mem:
        out["requested_memory"] = spec.resources.mem
    return out


# ------------------------------------------------------------------ anomalies


def _anomaly(label: str, severity: str, message: str, source: str, count: int = 1, kind: str = "finding") -> dict[str, Any]:
    return {"label": label, "severity": severity, "message": message, "count": count, "source": source, "kind": kind}


def _plugin_error_anomalies(events) -> list[dict[str, Any]]:
    """A plugin that broke while following the job, once per plugin and hook: a health checker
    that crashed means its checks are incomplete, whatever else the report says."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        if event.kind in ("plugin_error", "backend_broken", "cancel_unconfirmed", "forgotten"):
            hook = event.data.get("hook") or event.kind
            label = "checks incomplete" if hook in ("runjob_check_health", "runjob_scan_log") else event.kind
            severity = "warning" if event.kind == "plugin_error" else "error"
            entry = seen.setdefault((event.source, f"{event.kind}:{hook}"),
                                    _anomaly(label, severity, event.message, event.source, 0, "plugins"))
            entry["count"] += 1
    return list(seen.values())


def _anomalies(events, artifacts, summary, attempts) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.kind != "finding":
            continue
        label = event.data.get("label") or "?"
        entry = seen.setdefault(label, _anomaly(label, event.data.get("severity") or "warning", event.message,
                                                event.source, 0, "health"))
        entry["count"] += 1
    out = list(seen.values())
    for artifact in artifacts:
        if artifact.kind == "problem":
            out.append(_anomaly(artifact.name, artifact.data.get("severity") or "warning",
                                artifact.data.get("message", artifact.location), artifact.source,
                                artifact.data.get("count") or 1, "validation"))
    for event in events:
        if event.kind in _BAD_EVENTS:
            out.append(_anomaly(event.kind, "error", event.message, event.source, 1, "lifecycle"))
    out.extend(_plugin_error_anomalies(events))
    out.extend(_result_anomalies(summary))
    for attempt in attempts[:-1]:
        out.append(_anomaly("attempt", "info", f"attempt {attempt['n']} ended {attempt['cause']}"
                            + (f"; {attempt['then']}" if attempt["then"] else ""), "runjob-report", 1, "attempts"))
    return out


def _result_anomalies(summary) -> list[dict[str, Any]]:
    out = []
    source = "runjob-report"
    n = summary.get("rows", 0)
    score = summary.get("score")
    if score and score.get("rows", 0) >= 2:
        if score["min"] == score["max"]:
            out.append(_anomaly("score-all-equal", "warning", f"all {score['rows']} scores are {score['min']:g}: "
                                "check the scorer and the answer extraction", source, score["rows"], "scores"))
        elif score["zeros"] + score["ones"] == score["rows"] and score["zeros"] >= MOSTLY_ZERO * score["rows"]:
            share = score["zeros"] / score["rows"]
            out.append(_anomaly("score-mostly-zero", "warning", f"scores are 0/1 with {score['zeros']} of {score['rows']} "
                                f"({share:.0%}) at 0: often a broken answer extractor or truncated answers",
                                source, score["zeros"], "scores"))
    truncated = summary.get("truncated")
    if truncated and truncated["rows"]:
        out.append(_anomaly("truncated", "warning", f"{truncated['rows']} of {n} responses ({truncated['rate']:.1%}) "
                            f"were truncated ({truncated['rule']})", source, truncated["rows"], "results"))
    empty = summary.get("empty")
    if empty and empty["rows"]:
        out.append(_anomaly("empty-response", "warning", f"{empty['rows']} of {n} rows ({empty['rate']:.1%}) have an "
                            f"empty or null {empty['field']}", source, empty["rows"], "results"))
    duplicates = summary.get("duplicate_keys")
    if duplicates and duplicates["rows"]:
        out.append(_anomaly("duplicate-keys", "warning", f"{duplicates['rows']} rows repeat an earlier "
                            f"{duplicates['field']}", source, duplicates["rows"], "results"))
    tokens = summary.get("tokens")
    if tokens and tokens.get("outliers"):
        out.append(_anomaly("token-length-outliers", "info", f"{tokens['outliers']} responses are far longer than the "
                            f"rest (above Q3 + 3 IQR of {tokens['field']})", source, tokens["outliers"], "results"))
    if summary.get("unparsable_lines"):
        out.append(_anomaly("unparsable-lines", "warning", f"{summary['unparsable_lines']} result lines are not JSON "
                            "objects", source, summary["unparsable_lines"], "results"))
    return out


#: Below this many scored rows a mean under chance is noise, not a finding.
MIN_ROWS_FOR_CHANCE = 30


def _reference_anomalies(spec, summary, cache: dict | None) -> list[dict[str, Any]]:
    """Scores against the benchmark reference's ``expected_score``: outside its range (a
    0-100 scale where 0-1 is meant), or a mean below chance (the answer extraction is broken)."""
    score = summary.get("score")
    if spec is None or not spec.benchmark or not score or not score.get("rows"):
        return []
    expected = _expected_score(spec.benchmark, cache)
    if not expected:
        return []
    out, source = [], "runjob-report"
    low, high = expected.get("min"), expected.get("max")
    if (low is not None and score["min"] < low) or (high is not None and score["max"] > high):
        out.append(_anomaly("score-out-of-range", "error", f"scores run {score['min']:g}..{score['max']:g}, outside "
                            f"{spec.benchmark}'s {low:g}..{high:g}: check the scorer's scale", source, score["rows"], "scores"))
    chance = expected.get("chance")
    if chance is not None and score["rows"] >= MIN_ROWS_FOR_CHANCE and score["mean"] < chance:
        out.append(_anomaly("score-below-chance", "warning", f"mean score {score['mean']:.3f} is below chance "
                            f"({chance:g}) for {spec.benchmark}: the answer extraction or the prompt format is likely "
                            "broken", source, score["rows"], "scores"))
    return out


def _expected_score(benchmark: str, cache: dict | None) -> dict | None:
    key = ("expected_score", benchmark)
    if cache is not None and key in cache:
        return cache[key]
    from runjob_core import references
    from runjob_core.errors import RunjobError

    try:
        found = references.find_reference(benchmark, references.all_references())
        expected = references.reference_metadata(found).get("expected_score") if found else None
    except RunjobError:
        expected = None  # a broken project reference is pre-flight's to report, not the report's
    if cache is not None:
        cache[key] = expected
    return expected


def _go_no_go(state, anomalies, summary) -> dict[str, Any]:
    errors = [a["label"] for a in anomalies if a.get("severity") == "error"]
    warnings = [a["label"] for a in anomalies if a.get("severity") == "warning"]
    checked = [f"job state {state}", f"{summary.get('rows', 0)} result rows parsed"]
    go = state == "COMPLETED" and not errors and summary.get("rows", 0) > 0
    return {"go": go, "checked": checked, "problems": errors, "warnings": warnings}


# ------------------------------------------------------------------ closing line and next steps


def _collected_elsewhere(row, events) -> dict[str, Any] | None:
    """Where the last collect of *row* put its results, when that was not this folder (a state shared
    by a team: another member's host): {host, path, who, reachable}; None when nothing says."""
    last = next((e for e in reversed(events) if e.kind == "collected" and e.data.get("path")), None)
    if last is None:
        return None
    path = last.data["path"]
    reachable = _results_folder.folder_of(Path(path), row.id) is not None
    return {"host": last.data.get("host"), "path": path, "who": last.who, "reachable": reachable}


def _fetch_published(row, spec, artifacts, elsewhere: dict[str, Any], hook) -> Path | None:
    """The job's results as a plugin published them (``runjob_fetch_results``: the Hub plugin
    brings its copy back), fetched into ``.runjob/fetched/<job id>/``, when the folder they were
    collected into is out of this host's reach; ``elsewhere`` says where they came from, or why
    they could not be read. None when no plugin published them."""
    from runjob_core.errors import RunjobError
    from runjob_core.models import Artifact
    from runjob_core.store import state_dir

    records = [Artifact(name=a.name, kind=a.kind, location=a.location, source=a.source, rows=a.rows, data=dict(a.data))
               for a in artifacts]
    folder = state_dir() / "fetched" / row.id
    try:
        fetched = hook.runjob_fetch_results(job=spec, artifacts=records, dest=folder)
    except RunjobError as exc:
        elsewhere["fetch_problem"] = str(exc)
        return None
    if fetched is None:
        return None
    published = next((a for a in reversed(records) if a.kind == ARTIFACT_HUB), None)
    elsewhere["fetched"] = {"folder": str(fetched),
                            "from": published.location if published is not None else str(fetched)}
    return Path(fetched)


def _closing(row, spec, state, events, artifacts) -> dict[str, Any]:
    """The mission's closing line, only when every part of it is true; else what is missing."""
    missing: list[str] = []
    if state != "COMPLETED":
        missing.append(f"the job has not completed (state {state})")
    collected = [e for e in events if e.kind in ("collected", "collect_failed")]
    last_collect = collected[-1] if collected else None
    if last_collect is None:
        missing.append("results not collected (runjob collect)")
    elif last_collect.kind == "collect_failed":
        missing.append(f"collect failed: {last_collect.message}")
    attempt = last_collect.attempt if last_collect else None
    current = [a for a in artifacts if attempt is None or a.attempt == attempt]
    hub = next((a for a in reversed(current) if a.kind == ARTIFACT_HUB), None)
    if hub is None:
        missing.append("not published to the Hub" + ("" if spec is None or spec.upload.repo else " (no upload.repo in the spec)"))
    elif not any(a.kind == ARTIFACT_VERIFIED for a in current):
        missing.append("the Hub copy was not verified")
    validation = next((a for a in reversed(current) if a.kind == ARTIFACT_VALIDATION), None)
    failed = [a.name for a in current if a.kind == ARTIFACT_PROBLEM and a.data.get("severity") == "error"]
    if validation is None:
        missing.append("results not validated")
    elif failed:
        missing.append("validation failed: " + ", ".join(failed))
    synced = [e for e in events if e.kind in ("dashboard_synced", "dashboard_failed")]
    if not synced or synced[-1].kind != "dashboard_synced" or (last_collect and synced[-1].id < last_collect.id):
        missing.append("dashboard not built since the last collect (runjob dashboard)")
    if missing:
        return {"complete": False, "line": "Not complete: " + "; ".join(missing) + ".", "missing": missing}
    revision = hub.data.get("revision") or hub.data.get("commit") or "?"
    return {"complete": True, "line": CLOSING.format(repo=hub.name, revision=revision), "missing": [],
            "hub_url": hub.location, "revision": revision}


def _next_steps(row, spec, state, report) -> list[str]:
    steps: list[str] = []
    ref = row.spec_path or row.name
    anomalies = report["anomalies"]
    labels = {a["label"] for a in anomalies}
    summary = report["results"]
    if row.kind == "canary":
        verdict = report["go_no_go"]
        if verdict["go"]:
            steps.append(f"canary GO: scale up to the full job with `runjob run {ref}` (same spec, no row limit)")
        else:
            steps.append(f"canary NO-GO ({', '.join(verdict['problems']) or 'state ' + str(state)}): fix it before the "
                         "full run")
    if state in ACTIVE:
        steps.append(f"still running: `runjob watch {row.id}`")
    if state in ("TIMEOUT", "PREEMPTED", "NODE_FAIL") or (state == "FAILED" and "resume_refused" in labels):
        steps.append(f"resume it from its newest checkpoint: `runjob resume {row.id}`")
    oom = state == "OUT_OF_MEMORY" or any("oom" in label.lower() for label in labels)
    if oom:
        steps.append("out of memory: ask for more GPUs (resources.gpus) or use a smaller micro-batch with more "
                     "gradient accumulation (the same effective batch); runjob changes neither for you")
    truncated = summary.get("truncated")
    if truncated and truncated["rows"]:
        limit = spec.model.max_tokens if spec else None
        steps.append(f"{truncated['rate']:.1%} of responses were cut at max_tokens{f' {limit}' if limit else ''}: raise "
                     "model.max_tokens in the spec and run again (a new spec hash)")
    empty = summary.get("empty")
    if empty and empty["rows"]:
        steps.append(f"{empty['rows']} rows have an empty {empty['field']}: fix the data or the prompt, then run again")
    if any(label.startswith("empty-field") or label.startswith("missing") for label in labels):
        steps.append("fix the data: validation found empty or missing fields")
    if state == "FAILED" and not oom:
        steps.append(f"read why it failed: `runjob logs {row.id}`")
    elif state == "CANCELLED" and (row.outcome or "").startswith("stopped:") and not oom:
        # runjob stopped it on a health finding (a torchrun rank's exception): not "done".
        steps.append(f"runjob stopped it ({row.outcome}): read why in `runjob logs {row.id}`, fix it, run again")
    closing = report["closing"]
    if state == "COMPLETED" and not closing["complete"]:
        collect_failed = any(item.startswith("collect failed") for item in closing["missing"])
        for item in closing["missing"]:
            if item.startswith("collect failed"):
                steps.append(f"{item}; fix that, then `runjob collect {row.id}` (it fetches what is missing)")
            elif item.startswith("not published") and not collect_failed and summary["folder"]:
                steps.append("publish the results: set upload.repo in the spec and run `runjob collect " + row.id + "`")
            elif item.startswith("results not collected") or (state == "COMPLETED" and summary["folder"] is None
                                                               and item.startswith("not published")):
                steps.append(f"collect the results: `runjob collect {row.id}`")
            elif item.startswith("dashboard"):
                steps.append("build the dashboard: `runjob dashboard`")
    if not steps and state != "COMPLETED":
        why = f" ({row.outcome})" if row.outcome else ""
        steps.append(f"it ended {state}{why}; nothing final was collected for it: `runjob logs {row.id}` shows why")
    if not steps and summary["folder"] is None:
        steps.append(f"nothing was collected for this job: `runjob collect {row.id}`")
    if not steps:
        steps.append(f"done: results in {summary['folder']}; see `runjob dashboard` for every job")
    return list(dict.fromkeys(steps))
