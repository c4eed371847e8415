"""During a run: when will the job be done, at the rate it really achieves, and will its time limit
cut it short?

The rate is the job's own: the progress of the running attempt (steps or rows, as its progress
file reports them to the monitor) since it started, counted from where the previous attempt
stopped, so a resumed attempt is not credited with its predecessors' work. The total is the
spec's (``params.steps`` / ``max_steps`` for training, the row count for inference, or the
``total`` its progress file states). No estimate is made before the attempt has progressed.
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


def eta_of(spec, attempts: list, now: float, *, total_hint: int | None = None) -> dict[str, Any] | None:
    """The ETA of the running attempt of a job, or None when it cannot be told yet."""
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
    elapsed = now - current.started_at
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
