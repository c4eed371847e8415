"""Progress read from a job's log, for jobs that never call runjob's ``progress()``.

A plain ``transformers.Trainer`` script prints its training bar (tqdm, redrawn with ``\\r``):
``  45%|####5     | 27/60 [00:05<00:06,  5.10it/s]``. Its ``27/60`` is the global step of
``max_steps`` (on a resume too: the bar starts at the step resumed from). Bars with a label
(``Map: 100%|...``, ``Loading weights: ...``) are other work and are ignored; of the
unlabelled ones, an evaluation bar is told apart by its smaller total.
"""

from __future__ import annotations

import re

#: An unlabelled tqdm bar at the start of a line or redraw: percent, bar, ``N/M [``.
_BAR = re.compile(r"(?:^|[\r\n])[ \t]*\d{1,3}%\|[^|\r\n]*\|\s*(\d+)/(\d+) \[")


def step_from_log(window: str) -> tuple[int, int] | None:
    """The newest (step, total) of the training bar in *window*, or None when it has none."""
    if "%|" not in window:
        return None
    bars = [(int(m.group(1)), int(m.group(2))) for m in _BAR.finditer(window)]
    if not bars:
        return None
    total = max(t for _, t in bars)
    return max((s, t) for s, t in bars if t == total)


def updates(attempt, window: str) -> dict:
    """The attempt's ``step`` from the log's training bar, when it moved forward."""
    found = step_from_log(window)
    if found is None or (attempt.step is not None and found[0] <= attempt.step):
        return {}
    return {"step": found[0]}
