"""A plain text table for the commands a user runs all day (``runjob status``).

rich's tables cost ~250 ms for twenty rows on the 2-core VM (measuring and wrapping every
cell), more than the whole rest of ``runjob status``; and at 80 columns they broke job ids
and states mid-word over several lines. This one measures each column once, and when the
terminal is too narrow it shortens the columns that can lose characters (a name, an
outcome: cut with "…") and never the ones that must stay whole (an id, a state), dropping
the least useful columns last. Piped output (no terminal, no ``COLUMNS``) is never cut.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

#: Two spaces between columns.
GAP = 2
#: A shortened column keeps at least this many characters (with the "…").
MIN_WIDTH = 10


def terminal_width(stream_fd: int = 1) -> int | None:
    """The width to fit: ``COLUMNS``, else the terminal's; None for a pipe or a file."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if not os.isatty(stream_fd):
        return None
    return shutil.get_terminal_size().columns


def render(columns: Sequence[str], rows: Sequence[Sequence[object]], *, width: int | None,
           whole: Sequence[str] = (), drop_order: Sequence[str] = ()) -> list[str]:
    """The table's lines. Columns named in *whole* are never cut; when cutting the others to
    :data:`MIN_WIDTH` is not enough, the columns of *drop_order* are left out, first first."""
    names = list(columns)
    cells = [["" if value is None else str(value).replace("\n", " ") for value in row] for row in rows]
    drops = [name for name in drop_order if name in names]
    while True:
        widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(names)]
        if width is not None:
            _shrink(names, widths, whole, width)
        if width is None or _total(widths) <= width or not drops:
            break
        index = names.index(drops.pop(0))  # still too wide: leave this column out, measure again
        del names[index]
        for row in cells:
            del row[index]
    lines = ["  ".join(name.ljust(w) for name, w in zip(names, widths)).rstrip()]
    for row in cells:
        lines.append("  ".join(_fit(value, w).ljust(w) for value, w in zip(row, widths)).rstrip())
    return lines


def _total(widths: list[int]) -> int:
    return sum(widths) + GAP * (len(widths) - 1)


def _shrink(names: list[str], widths: list[int], whole: Sequence[str], width: int) -> None:
    """Take one character at a time from the widest column that may lose one."""
    while _total(widths) > width:
        candidates = [i for i, name in enumerate(names) if name not in whole and widths[i] > MIN_WIDTH]
        if not candidates:
            return
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1


def _fit(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"
