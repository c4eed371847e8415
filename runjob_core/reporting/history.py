"""The monitor's side of the metrics history: new lines of the job's history file, and
metrics in new log text, into the store's ``metrics`` table.

Called once per observed attempt per cycle (:func:`runjob_core.monitor.observe.observe`).
The history file is read only when the progress file (which the monitor reads anyway) says
it grew past the offset already stored, so a job whose history did not change costs no
extra read. Log text is the window the monitor already read for the health checks. What
is remembered between cycles is the monitor's :class:`HistoryCursor`.
"""

from __future__ import annotations

import json
import posixpath

import attrs

from runjob_core.reporting import logmetrics

#: runjob_core.job.HISTORY_FILE (not imported: job.py is the node-side module).
HISTORY_FILE = "metrics.jsonl"
#: At most this much history per job per cycle; the rest comes next cycle.
MAX_READ_BYTES = 4 << 20
#: The history offset is one per job (one file for every attempt), kept with the log offsets.
_STREAM = "metrics"


@attrs.define
class HistoryCursor:
    """What one monitor remembers of each job's metrics between cycles (a new monitor
    process starts empty and carries on from the store)."""

    #: Job id -> the history file's size once read to its end (unchanged: not even a query).
    history_bytes: dict[str, int] = attrs.field(factory=dict)
    #: Job id -> whether the job records metrics of its own through progress().
    own_metrics: dict[str, bool] = attrs.field(factory=dict)
    #: Job id -> the last step given to log metrics that carry none.
    log_steps: dict[str, int] = attrs.field(factory=dict)


def observe(cursor: HistoryCursor, store, transport, attempt, submission, progress: dict | None, window: str) -> None:
    size = progress.get("history_bytes") if progress else None
    if isinstance(size, int) and not isinstance(size, bool):
        seen = cursor.history_bytes
        if seen.get(attempt.job_id) != size:  # unchanged since the last cycle: not even a store query
            offset = store.offset(attempt.job_id, 0, _STREAM)
            if offset == size:
                seen[attempt.job_id] = size
            elif size > offset:
                path = posixpath.join(posixpath.dirname(submission.progress_path), HISTORY_FILE)
                data = transport.read_from(path, offset, MAX_READ_BYTES)
                cut = data.rfind(b"\n")
                if cut != -1:
                    if _store_history(store, attempt, data[: cut + 1]):
                        cursor.own_metrics[attempt.job_id] = True
                    store.set_offset(attempt.job_id, 0, offset + cut + 1, _STREAM)
                    if offset + cut + 1 == size:
                        seen[attempt.job_id] = size
    if window and not _reports_own_metrics(cursor, store, attempt.job_id):
        _store_log_metrics(cursor, store, attempt, window)


def _reports_own_metrics(cursor: HistoryCursor, store, job_id: str) -> bool:
    """A job that records metrics through progress() is not also read from its log (its log
    lines would repeat them); rows_done alone does not count."""
    known = cursor.own_metrics
    if job_id not in known:  # once per job per monitor process
        known[job_id] = store.has_metrics(job_id, "job", besides="rows_done")
    return known[job_id]


def _store_history(store, attempt, data: bytes) -> bool:
    """Store the lines' points; True if any is a metric of the job's own (not rows_done)."""
    by_attempt: dict[int, list] = {}
    for line in data.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line torn by a kill and then appended to: skipped, not fatal
        if not isinstance(entry, dict):
            continue
        n = entry.get("attempt") if isinstance(entry.get("attempt"), int) else attempt.n
        ts = entry.get("t") if isinstance(entry.get("t"), (int, float)) else None
        step = entry.get("step") if isinstance(entry.get("step"), (int, float)) else None
        points = by_attempt.setdefault(n, [])
        for name, value in (entry.get("m") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                points.append((str(name)[:200], step, ts, float(value)))
        if isinstance(entry.get("rows_done"), int):
            points.append(("rows_done", None, ts, float(entry["rows_done"])))
    for n, points in by_attempt.items():
        store.add_metrics(attempt.job_id, n, points, source="job")
    return any(p[0] != "rows_done" for points in by_attempt.values() for p in points)


def _store_log_metrics(cursor: HistoryCursor, store, attempt, window: str) -> None:
    found = logmetrics.parse(window)
    if not found:
        return
    import time

    counters = cursor.log_steps
    if attempt.job_id not in counters:
        counters[attempt.job_id] = store.last_metric_step(attempt.job_id, "log") or 0
    now = time.time()
    points = []
    for step, values in found:
        if step is None:  # HF Trainer dicts carry no step: number them on from the last one
            counters[attempt.job_id] += 1
            step = counters[attempt.job_id]
        else:
            counters[attempt.job_id] = max(counters[attempt.job_id], step)
        points.extend((name[:200], step, now, value) for name, value in values.items())
    store.add_metrics(attempt.job_id, attempt.n, points, source="log")
