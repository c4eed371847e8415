"""Health checks on GPU telemetry, on every backend: GPUs idle too long, memory nearly full.

A core plugin (registered with the core's defaults) so that every backend's jobs get them
whether or not ``runjob-health`` is installed. It reads what :func:`runjob_core.gpu.telemetry.observe`
kept this cycle: an idle GPU in a running job (a stalled data loader, a hung collective) is
the commonest way paid GPU-hours are lost, and nothing in the log says so.
"""

from __future__ import annotations

import time

from runjob_core.models import RUNNING, Finding

from runjob_core import hookimpl  # the one marker (runjob_core.__init__)
SOURCE = "runjob-core"
IDLE_LABEL = "gpu_idle"
FULL_LABEL = "gpu_memory_near_full"
#: Memory within this share of the card's size is a warning (the next allocation may OOM).
NEAR_FULL_FRACTION = 0.98


@hookimpl
def runjob_check_health(job, submission, status, window, context):
    from runjob_core.gpu import telemetry as gpu_telemetry
    gpus = gpu_telemetry.state(context, submission.tag)
    _remember_last_line(context, submission.tag, window)
    if not gpus:
        return None
    findings = []
    idle_after = job.health.gpu_idle_minutes * 60
    # Spells that ended since the last look (the monitor read idle and busy samples together),
    # then the spell still going on.
    spells = [(start, end, index) for index, g in gpus.items() for start, end in g.pop("spells", ())
              if end - start >= idle_after]
    for start, end, index in sorted(spells):
        findings += _idle_finding(context, submission, [index], start, end, ended=True)
    ongoing = {i: g for i, g in gpus.items() if g.get("idle_since") is not None and g["last"] - g["idle_since"] >= idle_after}
    if ongoing:  # still idle; or idle to the end of a job that just ended (its last cycle)
        since = min(g["idle_since"] for g in ongoing.values())
        findings += _idle_finding(context, submission, sorted(ongoing), since, max(g["last"] for g in ongoing.values()),
                                  ended=status.state != RUNNING)
    for index, gpu in sorted(gpus.items()):
        total, used = gpu.get("total"), gpu.get("mem")
        if total and used is not None and used >= NEAR_FULL_FRACTION * total:
            if not _reported(context, submission, FULL_LABEL, f"GPU {index} "):
                findings.append(Finding(
                    label=FULL_LABEL, severity="warning", action="warn", source=SOURCE,
                    message=f"GPU {index} memory {used / 1024:.1f} of {total / 1024:.1f} GiB used (within 2% of the card): "
                            "the next allocation may run out of memory; a smaller batch or max_model_len leaves headroom"))
    return findings


@hookimpl
def runjob_scan_log(job, path):
    """An offline scan (``runjob health scan FILE``) has no GPU telemetry: nothing to find,
    and answering here spares decoding the whole file into text windows for this checker
    alone (~0.5 s of every 256 MiB)."""
    return []


def _idle_finding(context, submission, indices: list[int], since: float, until: float, *, ended: bool) -> list[Finding]:
    stamp = time.strftime("%H:%M:%S", time.localtime(since))
    if _reported(context, submission, IDLE_LABEL, f"since {stamp}"):
        return []
    seconds = until - since
    took = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    names = ",".join(str(i) for i in indices)
    verb = "was" if ended else ("are" if len(indices) > 1 else "is")
    window = f"since {stamp}, until {time.strftime('%H:%M:%S', time.localtime(until))}" if ended else f"since {stamp}"
    message = (f"GPU{'s' if len(indices) > 1 else ''} {names} {verb} idle for {took} (below 5% {window}): "
               "stalled data loader or hung collective?")
    last = _last_line(context, submission)
    return [Finding(label=IDLE_LABEL, severity="warning", action="warn", source=SOURCE,
                    message=message + (f" Last log line: {last}" if last else ""), text=last or None)]


def _reported(context, submission, label: str, marker: str) -> bool:
    """Whether this finding (the same idle episode, the same GPU) is already recorded for the
    attempt: said once, not every cycle, whichever runjob process said it."""
    said = context.core_memory.gpu.said
    key = (submission.tag, label, marker)
    if key in said:
        return True
    said.add(key)
    return any(e.attempt == submission.attempt and e.data.get("label") == label and marker in e.message
               for e in context.store.events(submission.job_id, kinds=("finding",)))


def _remember_last_line(context, tag: str, window: str) -> None:
    last = last_line(window or "")
    if last:
        context.core_memory.gpu.last_lines[tag] = last


def last_line(text: str) -> str:
    """The last non-blank line of *text*, stripped, at most 300 characters, read from its end:
    `health scan` hands every hook windows of megabytes, and splitting each into lines cost
    seconds over a 256 MiB log."""
    text = text.rstrip()  # every line separator is whitespace: the text now ends inside its last non-blank line
    size = 4096
    while True:
        parts = text[-size:].splitlines()
        if len(parts) > 1 or size >= len(text):
            return parts[-1].strip()[:300] if parts else ""
        size *= 4


def _last_line(context, submission) -> str:
    known = context.core_memory.gpu.last_lines.get(submission.tag)
    if known:
        return known
    # A monitor started after the job went quiet: the end of what was read of the log.
    offset = context.store.offset(submission.job_id, submission.attempt)
    data = context.transport_for(submission).read_from(submission.log_path, max(0, offset - 4096), min(offset, 4096))
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""
