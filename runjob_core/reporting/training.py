"""The report's training section: how far the run got and what each resume cost.

``steps_lost_per_resume`` is, for each attempt that was resumed, the steps it had reached
less the step of the checkpoint the next attempt started from: work done twice. The step
resumed from is what the monitor recorded with its "resuming" event, else the number of a
``checkpoint-N`` / ``step-N`` folder (Trainer's and runjob's own names).
"""

from __future__ import annotations

import re
from typing import Any

_STEP_FOLDER = re.compile(r"(?:checkpoint|step)-(\d+)/?$")


def section(spec, attempts, events, loss_points) -> dict[str, Any] | None:
    """``{steps_done, steps_total, final_loss, steps_lost_per_resume}``, or None for a job
    that is not a training job and reported no steps.

    :param loss_points: ``(attempt, series, step, ts, value)`` rows of the ``loss`` series.
    """
    steps = [a.step for a in attempts if a.step is not None]
    if not steps and (spec is None or spec.template != "training"):
        return None
    resumed_at = {e.attempt: e.data.get("resume_step") for e in events if e.kind == "resuming"}
    lost = []
    for before, after in zip(attempts, attempts[1:]):
        start = resumed_at.get(before.n)
        if start is None and after.resumed_from:
            match = _STEP_FOLDER.search(after.resumed_from)
            start = int(match.group(1)) if match else None
        if before.step is not None:
            lost.append(max(0, before.step - (start or 0)))
    total = _steps_total(spec)
    final = max(loss_points, key=lambda p: (p[0], p[2] if p[2] is not None else -1, p[3] or 0))[4] if loss_points else None
    return {"steps_done": max(steps) if steps else None, "steps_total": total, "final_loss": final,
            "steps_lost_per_resume": lost}


def _steps_total(spec) -> int | None:
    """``params.max_steps`` (or ``params.steps``) of the spec: the job's own number, when it says it."""
    params = getattr(spec, "params", None) or {}
    for key in ("max_steps", "steps", "total_steps"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
