"""During a run: when will the job be done, at the rate it really achieves, and will its time limit
cut it short?

The rate is the job's own: the running attempt's progress points (step or rows, with the time
the job itself wrote them into its progress history, as the monitor stores them), first to
last. Without two such points, its progress since the attempt was seen starting, counted from
where the previous attempt stopped, so a resumed attempt is not credited with its
predecessors' work. The total is the spec's (``params.steps`` / ``max_steps`` for training,
the row count for inference, or the ``total`` its progress file states). No estimate is made
before the attempt has progressed.
"""

from __future__ import annotations

import math
from typing import Any

from runjob_core.estimator.time_job import ROW_KEYS, hms


def _total(spec) -> tuple[int | None, str]:
    for key in ("steps", "max_steps"):
        value = spec.params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, "steps"
    for key in ROW_KEYS:
        value = spec.params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, "rows"
    return None, "rows"


def progress_points(store, job_id: str, attempt: int, unit: str) -> list[tuple[float, float]]:
    """(steps or rows done, time) of one attempt from the metrics history, in time order."""
    points = set()
    for n, series, step, ts, value in store.metrics(job_id, series=("rows_done",) if unit == "rows" else ()):
        if n != attempt or ts is None:
            continue
        if unit == "rows" and value is not None:
            points.add((float(value), float(ts)))
        elif unit == "steps" and step is not None and series != "rows_done":
            points.add((float(step), float(ts)))
    return sorted(points, key=lambda p: (p[1], p[0]))


def eta_for(store, row, now: float, *, total_hint: int | None = None, attempts: list | None = None) -> dict[str, Any] | None:
    """:func:`eta_of` for a stored job, with its progress history. *attempts*: the job's
    attempts when the caller read them already."""
    attempts = store.attempts(row.id) if attempts is None else attempts
    if not attempts or attempts[-1].ended_at is not None or not attempts[-1].started_at:
        return None  # no ETA before the attempt starts (eta_of): no spec to parse, no history to read
    spec = row.spec
    total, unit = _total(spec)
    if total is None and not total_hint:
        return None
    return eta_of(spec, attempts, now, total_hint=total_hint,
                  points=progress_points(store, row.id, attempts[-1].n, unit))


def _rate_from_points(points: list[tuple[float, float]] | None) -> float | None:
    if not points or len(points) < 2:
        return None
    (first, t0), (last, t1) = points[0], points[-1]
    return (last - first) / (t1 - t0) if t1 > t0 and last > first else None


def eta_of(spec, attempts: list, now: float, *, total_hint: int | None = None,
           points: list[tuple[float, float]] | None = None) -> dict[str, Any] | None:
    """The ETA of the running attempt of a job, or None when it cannot be told yet. *points*:
    the attempt's (progress, time) history (:func:`progress_points`), the best rate there is."""
    from runjob_core.config import parse_duration

    current = attempts[-1] if attempts else None
    if current is None or current.ended_at is not None or not current.started_at:
        return None
    total, unit = _total(spec)
    if total is None and total_hint:
        total, unit = int(total_hint), "rows"
    if total is None:
        return None
    done = current.step if unit == "steps" else current.rows_done
    if done is None:
        return None
    before = [(a.step if unit == "steps" else a.rows_done) or 0 for a in attempts[:-1]]
    base = max(before, default=0)
    # The attempt is seen starting at the first poll after it did; its own first progress
    # point may be earlier (a job observed late): the earlier of the two bounds its start.
    started = min(current.started_at, points[0][1]) if points else current.started_at
    elapsed = now - started
    rate = _rate_from_points(points)
    if rate is None:
        if done <= base or elapsed <= 0:
            return None
        rate = (done - base) / elapsed
    remaining = max(0, total - done) / rate
    out: dict[str, Any] = {"unit": unit, "done": done, "total": total, "rate_per_s": round(rate, 4),
                           "remaining_seconds": round(remaining, 1), "eta_at": now + remaining,
                           "limit_seconds": None, "warning": None}
    if spec.resources.time:
        limit = float(parse_duration(spec.resources.time))
        left = max(0.0, limit - elapsed)
        out["limit_seconds"] = limit
        if remaining > left:
            share = max(0, total - done - rate * left) / total
            more = math.ceil((remaining - left) / limit)
            then = ("it resumes from its last checkpoint" if spec.resume.auto
                    else "resume.auto is off, so the rest will not run")
            out["warning"] = (f"reaches its {hms(limit)} time limit in {hms(left)} with {share:.0%} of the {unit} "
                              f"left: ~{more} more segment{'s' if more != 1 else ''}; {then}")
    return out


def describe(eta: dict[str, Any]) -> str:
    """'1:05:00 left (12.3 steps/s, 4,100/20,000 steps)'."""
    per = f"{eta['rate_per_s']:.3g} {eta['unit']}/s"
    return f"{hms(eta['remaining_seconds'])} left ({per}, {eta['done']:,}/{eta['total']:,} {eta['unit']})"
