"""Turn scanner hits, scheduler states and progress into runjob findings."""

from __future__ import annotations

import time

from runjob_core.models import RUNNING, Finding
from runjob_health import _scan

SOURCE = "runjob-health"


class _Watch:
    """Per-submission state kept between cycles."""

    def __init__(self, max_tokens: int | None, stall_seconds: float) -> None:
        self.scanner = _scan.LogScanner(max_tokens=max_tokens)
        self.stall_seconds = stall_seconds
        self.last_change = time.time()
        self.stall_reported = False
        self.finished = False


def _watch_for(submission, context) -> _Watch:
    pad = context.scratchpad(SOURCE)
    watch = pad.get(submission.tag)
    if watch is None:
        job = context.store.get_job(submission.job_id).spec
        watch = _Watch(job.model.max_tokens, job.health.stall_minutes * 60)
        pad[submission.tag] = watch
    return watch


def _finding(hit) -> Finding:
    return Finding(label=hit.label, severity=hit.severity, message=hit.message, action=hit.action, source=SOURCE,
                   line=hit.line or None, text=hit.text or None)


def check(submission, status, window: str, context) -> list[Finding]:
    watch = _watch_for(submission, context)
    hits = watch.scanner.feed(window.encode()) if window else []
    now = time.time()
    if window:
        watch.last_change = now
        watch.stall_reported = False
    if status.terminal and not watch.finished:
        watch.finished = True
        hits += watch.scanner.finish()
        seen = {h.label for h in hits}
        hits += [h for h in _scan.findings_for_state(status.state, status.exit_code) if h.label not in seen]
    findings = [_finding(h) for h in hits]
    if status.state == RUNNING and not watch.stall_reported and now - watch.last_change > watch.stall_seconds:
        watch.stall_reported = True
        minutes = (now - watch.last_change) / 60
        findings.append(Finding(
            label="stalled", severity="warning", action="warn", source=SOURCE,
            message=f"no new log output for {minutes:.0f} min while RUNNING (stall window {watch.stall_seconds / 60:.0f} min); "
                    "check the job with runjob logs",
        ))
    return findings
