"""Turn scanner hits, scheduler states, progress and disk space into runjob findings."""

from __future__ import annotations

import re
import time

import attrs

from runjob_core.errors import RunjobError
from runjob_core.models import RUNNING, Finding
from runjob_health import _scan

SOURCE = "runjob-health"
#: Free-disk checks cost a remote command: at most one per job this often.
DISK_CHECK_SECONDS = 300.0
#: A checkpoint is late after this many times the job's checkpoint.every.
CHECKPOINT_SLACK = 1.5
#: A traceback followed by this long a silence is decided without waiting for more lines.
SETTLE_SECONDS = 15.0


def _seconds(every: str | None) -> float | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", (every or "").strip())
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)] if match else None


def _steps(every: str | None) -> int | None:
    """``checkpoint.every: 200 steps`` -> 200 (a bare number counts as steps too)."""
    match = re.fullmatch(r"(\d+)\s*(?:steps?)?", (every or "").strip())
    return int(match.group(1)) if match else None


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


class _Watch:
    """Per-submission state kept between cycles."""

    def __init__(self, job) -> None:
        self.scanner = _scan.LogScanner(max_tokens=job.model.max_tokens)
        self.policy = job.health
        self.checkpoint_every = _seconds(job.checkpoint.every)
        self.checkpoint_every_steps = _steps(job.checkpoint.every)
        self.first_step: int | None = None
        self.started = time.time()
        self.last_change = self.started
        self.last_progress: tuple | None = None
        self.reported: set[str] = set()
        self.reasons_seen: set[str] = set()
        self.finished = False


def _watch_for(job, submission, context) -> _Watch:
    pad = context.scratchpad(SOURCE)
    watch = pad.get(submission.tag)
    if watch is None:
        watch = pad[submission.tag] = _Watch(job)
    return watch


def _finding(hit) -> Finding:
    return Finding(label=hit.label, severity=hit.severity, message=hit.message, action=hit.action, source=SOURCE,
                   line=hit.line or None, text=hit.text or None)


def check(job, submission, status, window: str, progress, context) -> list[Finding]:
    watch = _watch_for(job, submission, context)
    hits = watch.scanner.feed(window.encode()) if window else []
    now = time.time()
    progress = progress or {}
    mark = (progress.get("step"), progress.get("rows_done"), progress.get("updated_at"))
    if window or (progress and mark != watch.last_progress):
        watch.last_change, watch.last_progress = now, mark
        watch.reported.discard("stalled")
    if not window and not status.terminal and now - watch.last_change > SETTLE_SECONDS:
        hits += watch.scanner.settle()
    if status.terminal and not watch.finished:
        watch.finished = True
        hits += watch.scanner.finish()
        seen = {h.label for h in hits} | watch.scanner.labels_seen()
        if "host_oom" in seen:
            seen.add("killed")  # the log's OOM record explains the scheduler's SIGKILL
        hits += [h for h in _scan.findings_for_state(status.state, status.exit_code) if h.label not in seen]
    findings = [_finding(h) for h in hits] + _scheduler_reason(watch, status)
    if status.state == RUNNING:
        findings += _stalled(watch, now) + _checkpoint_late(watch, progress, now) + _disk_low(watch, submission, context, now)
    return findings


def _scheduler_reason(watch: _Watch, status) -> list[Finding]:
    """The scheduler's own words for a live job (squeue's reason: a launch that failed and
    left the job held, a node that went down under it) never reach the job's log, so they go
    through the same rules, written as squeue prints them, once per distinct reason. They
    are reported, not acted on (action ``warn``): SLURM itself requeues a job whose node
    went down, and the job's end state, judged by ``findings_for_state``, decides what runjob
    does; a held job stays visible with the reason and the fix in the finding."""
    reason = (status.reason or "").strip()
    if status.terminal or not reason or reason in watch.reasons_seen:
        return []
    watch.reasons_seen.add(reason)
    scanner = _scan.LogScanner()
    hits = scanner.feed(f"({reason})\n".encode()) + scanner.finish()
    return [attrs.evolve(_finding(hit), message=f"{hit.message} (the scheduler's reason for the job: {reason}; "
                         "a held job stays queued until released: scontrol release JOBID, or runjob cancel)",
                         line=None, action="warn", severity="warning") for hit in hits]


def _once(watch: _Watch, label: str) -> bool:
    if label in watch.reported:
        return False
    watch.reported.add(label)
    return True


def _stalled(watch: _Watch, now: float) -> list[Finding]:
    window = watch.policy.stall_minutes * 60
    idle = now - watch.last_change
    out = []
    if idle > window and _once(watch, "stalled"):
        out.append(Finding(label="stalled", severity="warning", action="warn", source=SOURCE,
                           message=f"no new progress or log output for {idle / 60:.0f} min while RUNNING "
                                   f"(stall window {window / 60:.0f} min); look at runjob logs"))
    if watch.policy.stop_when_stalled and idle > 2 * window and _once(watch, "stalled-stop"):
        out.append(Finding(label="stalled", severity="error", action="stop", source=SOURCE,
                           message=f"stalled for {idle / 60:.0f} min, twice the window: stopping it (health.stop_when_stalled)"))
    return out


def _checkpoint_late(watch: _Watch, progress: dict, now: float) -> list[Finding]:
    if watch.checkpoint_every_steps:
        return _checkpoint_late_in_steps(watch, progress)
    if not watch.checkpoint_every:
        return []
    metrics = progress.get("metrics") or {}
    # The progress file is shared by a job's attempts: a checkpoint of an earlier attempt is
    # older than this one's start, and this attempt's clock starts when it does.
    last = max(float(metrics.get("last_checkpoint_at") or 0), watch.started)
    late = now - last
    if late > CHECKPOINT_SLACK * watch.checkpoint_every and _once(watch, f"checkpoint_late:{last}"):
        return [Finding(label="checkpoint_late", severity="warning", action="warn", source=SOURCE,
                        message=f"no checkpoint for {_duration(late)} (checkpoint.every is {_duration(watch.checkpoint_every)}): "
                                "a time limit or preemption now would lose that work")]
    return []


def _checkpoint_late_in_steps(watch: _Watch, progress: dict) -> list[Finding]:
    """``checkpoint.every: N steps`` against the steps the job reports (``progress(step=)``,
    RunjobCallback) and its last checkpoint's step (``checkpoint_saved``)."""
    step = progress.get("step")
    if not isinstance(step, int):
        return []
    last = (progress.get("metrics") or {}).get("last_checkpoint_step")
    since = step - (int(last) if isinstance(last, (int, float)) else _first_step(watch, step))
    every = watch.checkpoint_every_steps
    if since > CHECKPOINT_SLACK * every and _once(watch, f"checkpoint_late_steps:{last}"):
        where = f"since the checkpoint at step {int(last)}" if isinstance(last, (int, float)) else "since this attempt began"
        return [Finding(label="checkpoint_late", severity="warning", action="warn", source=SOURCE,
                        message=f"no checkpoint for {since} steps {where}, now at step {step} (checkpoint.every is "
                                f"{every} steps): a time limit or preemption now would lose that work")]
    return []


def _first_step(watch: _Watch, step: int) -> int:
    """The first step this attempt reported: a resume starts past 0."""
    if watch.first_step is None:
        watch.first_step = step
    return watch.first_step


def _disk_low(watch: _Watch, submission, context, now: float) -> list[Finding]:
    # One `df` per cluster and scratch filesystem every DISK_CHECK_SECONDS, shared by all
    # of its jobs: never one remote command per job per cycle.
    scratch = submission.job_dir.split("/jobs/", 1)[0]
    cache = context.scratchpad(SOURCE + ":disk")
    key = (submission.cluster, scratch)
    checked_at, free, total = cache.get(key, (0.0, None, None))
    if now - checked_at >= DISK_CHECK_SECONDS:
        try:
            free, total = context.transport_for(submission).disk_free(scratch)
        except (RunjobError, OSError, KeyError):
            free = total = None  # a failed df is not a finding; the next check tries again
        cache[key] = (now, free, total)
    if not total:
        return []
    percent = 100.0 * free / total
    if percent < watch.policy.disk_low_percent and _once(watch, "disk_low"):
        return [Finding(label="disk_low", severity="warning", action="warn", source=SOURCE,
                        message=f"{percent:.1f}% free ({free / 2**30:.1f} GiB) on {scratch}, where the job writes; "
                                f"below health.disk_low_percent={watch.policy.disk_low_percent:g}: free space before it fills")]
    return []
