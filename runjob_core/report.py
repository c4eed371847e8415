"""The results report of a job, built from the store and its results folder."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from runjob_core.lifecycle import results_folder
from runjob_core.store import JobRow, Store

SAMPLE_ROWS = 3
_TEXT_LIMIT = 160


def build_report(store: Store, row: JobRow) -> dict[str, Any]:
    attempts = store.attempts(row.id)
    events = store.events(row.id)
    findings = [e for e in events if e.kind == "finding"]
    artifacts = store.artifacts(row.id)
    dest = results_folder(row)
    summary, samples = _summarise_results(dest)
    latest = attempts[-1] if attempts else None
    anomalies = _anomalies(findings, artifacts, events)
    report = {
        "job": {
            "id": row.id, "name": row.name, "kind": row.kind, "cluster": row.cluster, "backend": row.backend,
            "state": row.state, "outcome": row.outcome, "spec_hash": row.spec_hash, "spec_path": row.spec_path,
        },
        "attempts": [
            {"n": a.n, "backend_job_id": a.backend_job_id, "state": a.state, "exit_code": a.exit_code, "reason": a.reason,
             "submitted_at": a.submitted_at, "started_at": a.started_at, "ended_at": a.ended_at,
             "resumed_from": a.resumed_from, "step": a.step, "rows_done": a.rows_done}
            for a in attempts
        ],
        "results": {"folder": str(dest), **summary},
        "samples": samples,
        "anomalies": anomalies,
        "artifacts": [{"name": a.name, "kind": a.kind, "location": a.location, "rows": a.rows, "source": a.source} for a in artifacts],
        "next_step": _next_step(row, latest.state if latest else None, anomalies, summary),
    }
    if row.kind == "canary":
        report["go_no_go"] = _go_no_go(latest.state if latest else None, anomalies, summary)
    return report


def _summarise_results(dest: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    files = sorted(p for p in dest.rglob("*.jsonl")) if dest.is_dir() else []
    if not files:
        return {"files": [], "rows": 0}, []
    rows: list[dict[str, Any]] = []
    bad_lines = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError:
                    bad_lines += 1
                    continue
                if isinstance(value, dict):
                    rows.append(value)
    columns: dict[str, dict[str, Any]] = {}
    for name in sorted({k for r in rows for k in r}):
        values = [r.get(name) for r in rows]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        texts = [v for v in values if isinstance(v, str)]
        info: dict[str, Any] = {"missing": sum(1 for v in values if v is None or v == "")}
        if numbers and len(numbers) >= len(values) / 2:
            info.update(kind="number", min=min(numbers), max=max(numbers), mean=round(statistics.fmean(numbers), 4))
        elif texts:
            lengths = [len(t) for t in texts]
            info.update(kind="text", min_chars=min(lengths), max_chars=max(lengths))
        columns[name] = info
    samples = [{k: (v[:_TEXT_LIMIT] + "..." if isinstance(v, str) and len(v) > _TEXT_LIMIT else v) for k, v in r.items()}
               for r in rows[:SAMPLE_ROWS]]
    summary = {"files": [str(p) for p in files], "rows": len(rows), "unparsable_lines": bad_lines, "columns": columns}
    return summary, samples


def _anomalies(findings, artifacts, events) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for event in findings:
        label = event.data.get("label", "?")
        entry = seen.setdefault(label, {"label": label, "severity": event.data.get("severity"), "message": event.message,
                                        "count": 0, "source": event.source})
        entry["count"] += 1
    out = list(seen.values())
    for artifact in artifacts:
        if artifact.kind == "problem":
            out.append({"label": artifact.name, "severity": artifact.data.get("severity"),
                        "message": artifact.data.get("message", artifact.location), "count": artifact.data.get("count", 1),
                        "source": artifact.source})
    for event in events:
        if event.kind in ("resume_refused", "rejected", "submit_failed", "collect_failed", "resume_failed"):
            out.append({"label": event.kind, "severity": "error", "message": event.message, "count": 1, "source": event.source})
    return out


def _next_step(row: JobRow, state: str | None, anomalies, summary) -> str:
    errors = [a for a in anomalies if a.get("severity") == "error"]
    if state == "COMPLETED" and not errors:
        if row.kind == "canary":
            return f"canary looks good: run the full job with `runjob run {row.spec_path or row.name}`"
        folder = Path(summary["files"][0]).parent if summary.get("files") else Path("results")
        return f"results are in {folder}; publish them with upload.repo in the job spec"
    if errors:
        first = errors[0]
        return f"fix {first['label']}: {first['message']}; then `runjob submit {row.spec_path or row.name}`"
    if state in ("TIMEOUT", "PREEMPTED", "NODE_FAIL"):
        return f"resume it: `runjob resume {row.id}`"
    if state in ("PENDING", "RUNNING", "SUBMITTING", "REQUEUED"):
        return f"still running: `runjob watch {row.id}`"
    if state == "FAILED":
        return f"read the log: `runjob logs {row.id}`"
    return f"see `runjob events {row.id}`"


def _go_no_go(state: str | None, anomalies, summary) -> dict[str, Any]:
    errors = [a["label"] for a in anomalies if a.get("severity") == "error"]
    warnings = [a["label"] for a in anomalies if a.get("severity") == "warning"]
    checked = [f"job state {state}", f"{summary.get('rows', 0)} result rows parsed"]
    go = state == "COMPLETED" and not errors and summary.get("rows", 0) > 0
    return {"go": go, "checked": checked, "problems": errors, "warnings": warnings}
