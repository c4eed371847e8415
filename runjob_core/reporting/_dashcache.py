"""What the dashboard remembers between builds, so a rebuild redoes only the jobs that changed.

Every collect rebuilds the dashboard ("sync dashboard"). Building a job's report and page
is most of a build (~2 ms a job), so at a thousand jobs a full rebuild took 1.6-4 s on the
2-core VM: a collect waited for every other job. Now each job's index summary is kept in
``.summaries.json`` with a *stamp* of what it was built from: the job row's state and
outcome, the fields of its attempts, the count and newest row id of its events,
artifacts and metric points (four queries for all jobs), and the size and mtime of its
collected results files. A job whose stamp is unchanged, that has no
active attempt (its elapsed time and progress move without a row being added) and whose
page is on disk keeps its summary and page; the others are rebuilt. The whole cache is
dropped when runjob's version or the clusters (prices, GPU types) change.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runjob_core._version import __version__

FILE = ".summaries.json"
#: Bumped when a summary's fields or a page's layout change: older caches are ignored.
#: 2: running jobs are remembered too (no stamp), with their ``row`` state and ``eta``.
#: 3: the summary says who submitted the job (``who``, the index's column).
FORMAT = 3


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the dashboard folder's lock (``.sync.lock``, flock) while its summaries are
    read, updated and written back: two collects syncing at once take turns."""
    fd = os.open(out / ".sync.lock", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def stamps(store) -> dict[str, list]:
    """Job id -> what its page and summary were built from (:meth:`Store.change_stamps`)."""
    return store.change_stamps()


def header(clusters: dict | None) -> dict[str, Any]:
    text = json.dumps({name: repr(cluster) for name, cluster in sorted((clusters or {}).items())}, sort_keys=True)
    return {"format": FORMAT, "version": __version__, "clusters": hashlib.sha256(text.encode()).hexdigest()[:16]}


def load(out: Path, clusters: dict | None) -> dict[str, dict]:
    """The cached {job id: {"stamp", "summary", "gpu_weeks"}}; empty when missing, damaged or of another build."""
    try:
        data = json.loads((out / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # first build, or cut by a full disk: it is only a cache
    if not isinstance(data, dict) or data.get("header") != header(clusters) or not isinstance(data.get("jobs"), dict):
        return {}
    return data["jobs"]


def stamp_of(row, table_stamps: list | None, active: bool) -> list | None:
    """The job's stamp, or None when it must be rebuilt whatever the cache says."""
    if active:
        return None
    return [row.state, row.outcome, table_stamps or [], _results_stamp(row)]


def _results_stamp(row) -> list:
    # The collected results live outside the store (a file replaced or appended to changes
    # the report): the same signature the report's results cache uses.
    from runjob_core.collecting import results_folder

    dest = results_folder(row)
    files = sorted(dest.rglob("*.jsonl")) if dest.is_dir() else []
    return [str(dest.absolute()), [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files]]


def reusable(entry: dict | None, stamp: list | None, page: Path) -> dict | None:
    """The cached entry (``summary``, ``gpu_weeks``) when the job did not change since it was
    built and its page exists."""
    if stamp is None or not entry or entry.get("stamp") != stamp or not page.exists():
        return None
    return entry if "summary" in entry and "gpu_weeks" in entry else None


def dump(clusters: dict | None, jobs: dict[str, dict]) -> bytes:
    return json.dumps({"header": header(clusters), "jobs": jobs}, default=str).encode()
