"""The end of the artifact chain, after ``lifecycle.collect`` recorded its artifacts: one
activity-log line per step, then the dashboard rebuilt (the "sync dashboard" step)."""

from __future__ import annotations

from typing import Any

from runjob_core.reporting import activity


def after_collect(context, row, attempt: int, artifacts: list) -> None:
    by_kind = {a.kind: a for a in artifacts}
    hub = by_kind.get("hub")
    checked = by_kind.get("validation")
    for artifact in artifacts:
        data: dict[str, Any] = artifact.data or {}
        label = artifact.kind if artifact.kind == artifact.name else f"{artifact.kind} {artifact.name}"
        if artifact.kind == "problem":
            label += f" ({data.get('severity', '?')}): {data.get('message', artifact.location)}"
        activity.append(context.state_dir, job=f"{row.name} {row.id}", artifact=label, rows=artifact.rows,
                        token_range=data.get("token_range"), score_range=data.get("score_range"),
                        hub_url=artifact.location if artifact.kind in ("hub", "verified") else None,
                        revision=data.get("revision") if artifact.kind == "hub" else None)
    sync_dashboard(context, row, attempt, summary={
        "rows": (checked or by_kind.get("results")).rows if (checked or by_kind.get("results")) else None,
        "token_range": checked.data.get("token_range") if checked else None,
        "score_range": checked.data.get("score_range") if checked else None,
        "hub_url": hub.location if hub else None, "revision": hub.data.get("revision") if hub else None})


def sync_dashboard(context, row, attempt: int | None, summary: dict[str, Any]) -> None:
    """Rebuild the dashboard; record that it is in sync (or why not) for this job."""
    from runjob_core.reporting.dashboard import Builder

    out = context.state_dir / "dashboard"
    builder = Builder(context.store, out, clusters=context.clusters)
    try:
        built = builder.build()
    except OSError as exc:  # a full or read-only disk: the results are safe, the dashboard is stale
        context.event(row.id, "dashboard_failed", f"dashboard not rebuilt: {exc}", attempt=attempt)
        return
    context.event(row.id, "dashboard_synced", f"dashboard rebuilt: {built['path']} ({built['jobs']} jobs)",
                  attempt=attempt, path=built["path"])
    builder.build_job(row.id)  # its page now shows the closing line with "Dashboard synced"
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


def record_estimates(store, row, checks) -> None:
    """Keep pre-flight's estimates with the job (once), for the report's estimate-versus-actual."""
    if not checks.estimates or store.events(row.id, kinds=("estimates",)):
        return
    items = [{"source": e.source, "summary": e.summary, "fits": e.fits, "data": e.data} for e in checks.estimates]
    store.add_event(row.id, "estimates", f"{len(items)} pre-flight estimates", data={"estimates": items})
