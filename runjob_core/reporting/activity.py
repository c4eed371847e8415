"""The human-readable activity log, ``.runjob/activity.md``: one Markdown table row per
artifact-chain step (downloaded, published, verified, validated, dashboard synced).

Several runjob processes may share one state folder: each row is written with a single
``write`` to a file opened with O_APPEND, under an exclusive ``flock`` that also covers
writing the header of a new file, so rows never interleave and the header comes once.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

FILE_NAME = "activity.md"
COLUMNS = ("time (UTC)", "job", "artifact", "rows", "token range", "score range", "Hub URL", "revision")
HEADER = ("# runjob activity\n\n| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n")


def path_for(state_dir: Path) -> Path:
    return Path(state_dir) / FILE_NAME


def cell(value: Any) -> str:
    """A value as one Markdown table cell: no newline or pipe can break the row."""
    if value is None or value == "":
        return "-"
    text = str(value).replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.split())


def _range(value: Any) -> str | None:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return "{:g}..{:g}".format(*value)
    return None


def append(state_dir: Path, *, job: str, artifact: str, rows: int | None = None, token_range=None, score_range=None,
           hub_url: str | None = None, revision: str | None = None, ts: float | None = None) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts if ts is not None else time.time()))
    line = "| " + " | ".join(cell(v) for v in (stamp, job, artifact, rows, _range(token_range), _range(score_range),
                                                hub_url, revision)) + " |\n"
    path = path_for(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            data = line if os.fstat(fd).st_size else HEADER + line
            os.write(fd, data.encode())
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return line


def read(state_dir: Path) -> str:
    path = path_for(state_dir)
    return path.read_text(encoding="utf-8") if path.exists() else ""
