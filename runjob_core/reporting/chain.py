"""The end of the artifact chain (the core's ``runjob_collected``, :mod:`.plugin`): the
collect's summary computed once, then the ``results`` event, one activity-log line per
artifact, and the dashboard synced for the job."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runjob_core.models import (
    ARTIFACT_HUB, ARTIFACT_PROBLEM, ARTIFACT_RESULTS, ARTIFACT_VALIDATION, ARTIFACT_VERIFIED, Artifact,
)
from runjob_core.reporting import activity


def summary(artifacts: Sequence[Artifact]) -> dict[str, Any] | None:
    """What the collect brought, in one dict a dashboard can take whole: rows (the validated
    count, else the downloaded one), the local folder, the Hub URL and revision, the token
    and score ranges. None when no results were downloaded."""
    by_kind = {a.kind: a for a in artifacts}
    results, hub, checked = by_kind.get(ARTIFACT_RESULTS), by_kind.get(ARTIFACT_HUB), by_kind.get(ARTIFACT_VALIDATION)
    if results is None:
        return None
    return {"rows": (checked or results).rows, "local": results.location,
            "hub_url": hub.location if hub else None, "revision": hub.data.get("revision") if hub else None,
            "token_range": checked.data.get("token_range") if checked else None,
            "score_range": checked.data.get("score_range") if checked else None}


def after_collect(context, row, attempt: int, artifacts: Sequence[Artifact]) -> None:
    """The ``results`` event (when results came), the activity log, the dashboard."""
    brought = summary(artifacts)
    if brought is not None:
        _results_event(context, row, attempt, brought)
    for artifact in artifacts:
        data: dict[str, Any] = artifact.data or {}
        label = artifact.kind if artifact.kind == artifact.name else f"{artifact.kind} {artifact.name}"
        if artifact.kind == ARTIFACT_PROBLEM:
            label += f" ({data.get('severity', '?')}): {data.get('message', artifact.location)}"
        activity.append(context.state_dir, job=f"{row.name} {row.id}", artifact=label, rows=artifact.rows,
                        token_range=data.get("token_range"), score_range=data.get("score_range"),
                        hub_url=artifact.location if artifact.kind in (ARTIFACT_HUB, ARTIFACT_VERIFIED) else None,
                        revision=data.get("revision") if artifact.kind == ARTIFACT_HUB else None)
    shown = {key: (brought or {}).get(key) for key in ("rows", "token_range", "score_range", "hub_url", "revision")}
    sync_dashboard(context, row, attempt, summary=shown)


def _results_event(context, row, attempt: int, brought: dict[str, Any]) -> None:
    """One event a dashboard or a script can take whole (``runjob events --kind results``)."""
    data = {"artifact": row.name, "rows": brought["rows"], "local": brought["local"], "hub_url": brought["hub_url"],
            "hub_revision": brought["revision"], "token_range": brought["token_range"],
            "score_range": brought["score_range"]}
    parts = [f"{data['rows']} rows in {data['local']}"]
    if data["token_range"]:
        parts.append("output tokens {}..{}".format(*data["token_range"]))
    if data["score_range"]:
        parts.append("score {:g}..{:g}".format(*data["score_range"]))
    if data["hub_url"]:
        parts.append(f"on the Hub at {data['hub_url']} (revision {data['hub_revision']})")
    context.event(row.id, "results", f"{row.name}: " + ", ".join(parts), attempt=attempt, data=data)


def sync_dashboard(context, row, attempt: int | None, summary: dict[str, Any], out: Path | None = None) -> None:
    """Bring the dashboard up to date for this job (:meth:`Builder.sync_job`: its page, the
    index and the clusters page, not every job's); record that it is in sync, or why not.

    The event comes first, so that the page written says "Dashboard synced" in its closing
    line; a write that then fails is recorded after it (the report reads the last one)."""
    from runjob_core.reporting.dashboard import Builder

    out = out or context.state_dir / "dashboard"
    index = out / "index.html"
    context.event(row.id, "dashboard_synced", f"dashboard synced: {index}", attempt=attempt, path=str(index))
    try:
        Builder(context.store, out, clusters=context.clusters).sync_job(row.id)
    except OSError as exc:  # a full or read-only disk: the results are safe, the dashboard is stale
        context.event(row.id, "dashboard_failed", f"dashboard not rebuilt: {exc}", attempt=attempt)
        return
    activity.append(context.state_dir, job=f"{row.name} {row.id}", artifact="dashboard synced", **summary)


def record_synced(store, builder) -> list[str]:
    """After a full build: every job collected since its last sync is now in the dashboard.
    Say so in its activity log and rewrite its page (its closing line can now be true)."""
    last: dict[str, str] = {}
    for event in store.events(kinds=("collected", "dashboard_synced")):
        last[event.job_id] = event.kind
    pending = [job_id for job_id, kind in last.items() if kind == "collected"]
    for job_id in pending:
        store.add_event(job_id, "dashboard_synced", f"dashboard rebuilt: {builder.out / 'index.html'}",
                        data={"path": str(builder.out / "index.html")})
        builder.build_job(job_id)
    return pending

