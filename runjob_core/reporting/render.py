"""The report as text: for the terminal (rich, samples cut) and as Markdown (samples whole)."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from runjob_core.reporting.activity import cell
from runjob_core.reporting.report import hms
from runjob_core.reporting.results import cut


def headline(report: dict[str, Any]) -> str:
    job = report["job"]
    outcome = f" - {job['outcome']}" if job["outcome"] else ""
    return f"{job['name']} ({job['id']}, {job['kind']}) on {job['cluster']}: {job['state']}{outcome}"


def statistics_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, value) lines of the results summary, shared by every rendering."""
    r = report["results"]
    rows = [("rows", f"{r['rows']} in {r['folder']}" if r["folder"] else "none: nothing was collected for this job")]
    where = r.get("collected_on")
    by = f" by {where['who']}" if where and where["who"] else ""
    if where and where.get("fetched") and r["folder"] == where["fetched"]["folder"]:  # out of reach, read from a copy
        rows[0] = ("rows", f"{r['rows']} read from {where['fetched']['from']} (collected on {where['host']}:{where['path']}"
                   f"{by}, out of this host's reach)")
    elif where and not r["folder"]:  # collected by a member on another host, out of this host's reach
        rows[0] = ("rows", f"none here: collected on {where['host']}:{where['path']}{by}; `runjob collect "
                   f"{report['job']['id']}` fetches them here" + (f" (the published copy: {where['fetch_problem']})"
                                                                  if where.get("fetch_problem") else ""))
    elif where and r["folder"] == where["path"]:
        rows[0] = ("rows", f"{r['rows']} in {where['host']}:{where['path']}" + (f" (collected by {where['who']})"
                   if where["who"] else ""))
    ran = {c["attempt"]: c for c in report.get("code") or []}  # the last record of each attempt
    if ran:
        hashes = list(dict.fromkeys(c["hash"] for c in ran.values()))
        rows.append(("code", ", ".join(f"{h} (attempt {', '.join(str(n) for n, c in ran.items() if c['hash'] == h)})"
                                       for h in hashes) + f", {next(iter(ran.values()))['files']} files"))
    score = r.get("score")
    if score and score.get("rows"):
        rows.append((f"score ({r['fields']['score']})", f"mean {score['mean']:g}, median {score['median']:g}, "
                     f"min {score['min']:g}, max {score['max']:g} over {score['rows']} rows"))
    for name, group in (r.get("score_by_category") or {}).items():
        rows.append((f"  {r['fields']['category']} = {name}", f"mean {group['mean']:g} over {group['rows']} rows"))
    for task, metrics in (report.get("tasks") or {}).items():  # the harness's own aggregates (lm-eval)
        shown = ", ".join(f"{metric} {value:g}" for metric, value in metrics.items())
        rows.append((f"{r.get('reader', 'harness')} {task}", shown or "(no numeric score)"))
    tokens = r.get("tokens")
    if tokens:
        approx = " (approximate: no token column)" if tokens["approximate"] else ""
        rows.append((f"tokens ({tokens['field']})", f"{tokens['min']}..{tokens['max']}, p50 {tokens['p50']}, "
                     f"p90 {tokens['p90']}, p99 {tokens['p99']}{approx}"))
    if "truncated" in r:
        rows.append(("truncated", f"{r['truncated']['rows']} ({r['truncated']['rate']:.1%}; {r['truncated']['rule']})"))
    if "empty" in r:
        rows.append((f"empty {r['empty']['field']}", f"{r['empty']['rows']} ({r['empty']['rate']:.1%})"))
    if "duplicate_keys" in r:
        rows.append((f"duplicate {r['duplicate_keys']['field']}", str(r["duplicate_keys"]["rows"])))
    training = report.get("training")
    if training:
        of = f" of {training['steps_total']}" if training["steps_total"] is not None else ""
        loss = f", final loss {training['final_loss']:.4g}" if training["final_loss"] is not None else ""
        lost = training["steps_lost_per_resume"]
        again = f", steps redone per resume: {', '.join(map(str, lost))}" if lost else ""
        rows.append(("training", f"step {training['steps_done']}{of}{loss}{again}"))
    res = report["resources"]
    cost = f", cost {res['cost']:.2f}" if res.get("cost") is not None else ""
    rows.append(("compute", f"{hms(res['run_seconds'])} running, {res['gpus']} GPUs, {res['gpu_hours']:g} GPU-hours{cost}"))
    gpu = report.get("gpu")
    if gpu:
        rows.append(("GPU use", f"utilisation mean {gpu['mean_util_percent']:g}%, peak {gpu['peak_util_percent']:g}%; "
                     f"peak memory {gpu['peak_memory_mib'] / 1024:.1f} GiB; idle {gpu['idle_gpu_hours']:g} GPU-hours "
                     f"({gpu['samples']} samples)"))
    est = report["estimate"]
    parts = [f"actual {est['actual_walltime']}"]
    if est.get("requested_walltime"):
        parts.append(f"requested {est['requested_walltime']}")
    if est.get("estimated_walltime"):
        parts.append(f"estimated {est['estimated_walltime']}")
    rows.append(("walltime", ", ".join(parts)))
    if any(est.get(k) is not None for k in ("peak_memory_gib", "gpu_peak_gib", "estimated_memory_gib")):
        mem = []
        if est.get("peak_memory_gib") is not None:
            mem.append(f"peak {est['peak_memory_gib']:g} GiB from {est['peak_memory_source']}")
        if est.get("gpu_peak_gib") is not None:
            mem.append(f"GPU peak {est['gpu_peak_gib']:g} GiB ({est['gpu_peak_source']})")
        if est.get("estimated_memory_gib") is not None:
            mem.append(f"estimated {est['estimated_memory_gib']:g} GiB peak per GPU")
        rows.append(("memory", ", ".join(mem)))
    return rows


@attrs.frozen
class Line:
    """One line of the terminal report: *label* in bold (and in *colour*), then *text*."""

    label: str = ""
    text: str = ""
    colour: str | None = None


@attrs.frozen
class Table:
    """One table of the terminal report; cells are plain values (the printer escapes them)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def terminal(report: dict[str, Any]) -> list[Line | Table]:
    """The report for the terminal, as lines and tables in order (samples cut); the CLI
    prints them (:func:`runjob_core.cli._show.report`)."""
    out: list[Line | Table] = [Line("Report:", headline(report))]
    out.append(Table("Attempts", ("#", "backend id", "ran", "ended", "step", "rows", "then"), tuple(
        (a["n"], a["backend_job_id"], hms(a["run_seconds"]), a["cause"], a["step"], a["rows_done"], a["then"])
        for a in report["attempts"])))
    out.append(Table("Summary", ("", ""), tuple(statistics_rows(report))))
    if report["samples"]:
        out.append(Line("Samples"))
        out += [Line(text=f"  {sample['why']} (row {sample['index']}): "
                     + json.dumps(cut(sample["row"]), ensure_ascii=False, default=str)) for sample in report["samples"]]
    anomalies = report["anomalies"]
    if anomalies:
        out.append(Table("Anomalies", ("label", "severity", "count", "message", "source"), tuple(
            (a["label"], a["severity"], a["count"], a["message"], a["source"]) for a in anomalies)))
    else:
        out.append(Line(text="Anomalies: none found"))
    if report["artifacts"]:
        out.append(Table("Artifacts", ("name", "kind", "location", "rows"), tuple(
            (a["name"], a["kind"], a["location"], a["rows"]) for a in report["artifacts"])))
    if "go_no_go" in report:
        verdict = report["go_no_go"]
        out.append(Line(f"Canary verdict: {'GO' if verdict['go'] else 'NO-GO'}",
                        f"(checked: {', '.join(verdict['checked'])}; problems: {', '.join(verdict['problems']) or 'none'})",
                        "green" if verdict["go"] else "red"))
    out += [Line("Next:", step) for step in report["next_steps"]]
    out.append(Line(report["closing"]["line"], colour="green" if report["closing"]["complete"] else "yellow"))
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Report: {cell(report['job']['name'])}", "", cell(headline(report)), ""]
    lines += ["## Summary", "", "| | |", "|---|---|"]
    lines += [f"| {cell(k)} | {cell(v)} |" for k, v in statistics_rows(report)]
    lines += ["", "## Attempts", "", "| # | backend id | ran | ended | step | rows | then |", "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(cell(v) for v in (a["n"], a["backend_job_id"], hms(a["run_seconds"]), a["cause"], a["step"],
                                                 a["rows_done"], a["then"])) + " |" for a in report["attempts"]]
    if "go_no_go" in report:
        verdict = report["go_no_go"]
        lines += ["", f"**Canary verdict: {'GO' if verdict['go'] else 'NO-GO'}** (problems: "
                  f"{cell(', '.join(verdict['problems']) or 'none')})"]
    lines += ["", "## Anomalies", ""]
    if report["anomalies"]:
        lines += ["| label | severity | count | message | source |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(cell(a[k]) for k in ("label", "severity", "count", "message", "source")) + " |"
                  for a in report["anomalies"]]
    else:
        lines.append("None found.")
    if report["samples"]:
        lines += ["", "## Samples", ""]
        for sample in report["samples"]:
            text = json.dumps(sample["row"], ensure_ascii=False, indent=2, default=str)
            fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
            lines += [f"**{cell(sample['why'])}** (row {sample['index']})", "", fence + "json", text, fence, ""]
    if report["artifacts"]:
        lines += ["", "## Artifacts", "", "| name | kind | location | rows |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(cell(a[k]) for k in ("name", "kind", "location", "rows")) + " |" for a in report["artifacts"]]
    lines += ["", "## Next steps", ""] + [f"- {cell(step)}" for step in report["next_steps"]]
    lines += ["", f"**{cell(report['closing']['line'])}**", ""]
    return "\n".join(lines)
