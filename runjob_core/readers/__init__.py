"""Results readers: a harness's own output folder read as one table of per-sample rows.

The core's built-in reader is lm-evaluation-harness's (:mod:`runjob_core.readers.lm_eval`);
plugins add others through :func:`runjob_core.hookspecs.runjob_read_results`. Whoever
reads a results folder (collect's validation and publishing, the report, the dashboard)
asks :func:`read` first, so they all see the same rows; the rows are also written once to
:data:`ROWS_FILE` in the folder, the table that validation checks and the Hub gets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from runjob_core.models import ResultsTable

from runjob_core import hookimpl  # the one marker (runjob_core.__init__)
#: The reader's rows as JSONL, written at collect beside the harness's own files.
ROWS_FILE = "runjob_rows.jsonl"


@hookimpl
def runjob_read_results(folder, job):
    """The core's built-in reader: lm-evaluation-harness's results and samples files."""
    from runjob_core.readers import lm_eval

    return lm_eval.read(Path(folder))


def read(folder: Path, job=None, hook: Any = None) -> ResultsTable | None:
    """The table the readers make of *folder*, or None (read its JSONL files as they are).

    *hook* is a plugin manager's ``pm.hook``; without one (the dashboard's report) only the
    built-in readers are asked."""
    if not folder.is_dir():
        return None
    if hook is None:
        return runjob_read_results(folder=folder, job=job)
    return hook.runjob_read_results(folder=folder, job=job)


def write_rows(table: ResultsTable, folder: Path) -> Path:
    """Write the table's rows to ``folder/ROWS_FILE`` (only when they changed) and return its path."""
    path = folder / ROWS_FILE
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in table.rows)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return path
