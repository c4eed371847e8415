"""Whose results a local results folder holds: the manifest collect writes beside the files.

``results/<name>/`` is named after the job, so two jobs of one name meet there. Collect
writes ``.runjob-results.json`` into the folder: the runjob id and attempt it holds, whether
the copy is final or a peek at a running attempt, and the size and modification time of
every file it brought. From it:

* a job never reads a namesake's files: before collecting job B into a folder that holds
  job A's results, the folder is moved aside to ``results/<name>.<A>/`` (A's report finds
  it there); a folder without a manifest (written by hand, or by an older runjob) is moved
  to ``results/<name>.unclaimed-<time>/``;
* the report of a job reads the folder only when the manifest names that job;
* collect can always run again: a file the manifest lists that is gone or was changed
  locally is removed and fetched again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

MANIFEST = ".runjob-results.json"


def read(folder: Path) -> dict | None:
    """The manifest of *folder*, or None (no folder, no manifest, or one that is not ours)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("job_id"), str) else None


def claim(folder: Path, job_id: str) -> Path | None:
    """Make *folder* job *job_id*'s: move another job's (or nobody's) results out of the way.
    Returns where they went, or None when nothing was moved."""
    if not folder.is_dir():
        return None
    manifest = read(folder)
    if manifest is not None and manifest["job_id"] == job_id:
        return None
    if manifest is None and not any(folder.iterdir()):
        return None
    owner = manifest["job_id"] if manifest else "unclaimed-" + time.strftime("%Y%m%dT%H%M%S")
    aside = _free(folder.with_name(f"{folder.name}.{owner}"))
    folder.rename(aside)
    return aside


def _free(path: Path) -> Path:
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def folder_of(results: Path, job_id: str) -> Path | None:
    """Where job *job_id*'s collected results are: its results folder if the manifest names
    it, else the folder they were moved to when a namesake collected; None if nowhere."""
    for folder in (results, results.with_name(f"{results.name}.{job_id}")):
        manifest = read(folder)
        if manifest is not None and manifest["job_id"] == job_id:
            return folder
    return None


def write(folder: Path, job_id: str, attempt: int, files: list[str], *, final: bool) -> None:
    """Record what *folder* now holds for *job_id* (atomically: a reader sees the old or the new)."""
    listed = {}
    for rel in files:
        if rel == MANIFEST:
            continue  # a job's own file of that name is replaced by this one
        try:
            st = (folder / rel).stat()
        except OSError:
            continue
        listed[rel] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    data = {"job_id": job_id, "attempt": attempt, "final": final, "written_at": time.time(), "files": listed}
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f"{MANIFEST}.{os.getpid()}"
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, folder / MANIFEST)


def damaged(folder: Path, job_id: str, attempt: int) -> list[str]:
    """The files a final collect of (*job_id*, *attempt*) brought that are no longer as it left
    them (gone, resized, rewritten); ``["(no manifest)"]`` when the folder is not that collect's."""
    manifest = read(folder)
    if manifest is None or manifest["job_id"] != job_id or manifest.get("attempt") != attempt or not manifest.get("final"):
        return ["(no manifest)"]
    changed = []
    for rel, seen in (manifest.get("files") or {}).items():
        try:
            st = (folder / rel).stat()
        except OSError:
            changed.append(rel)
            continue
        if st.st_size != seen.get("size") or st.st_mtime_ns != seen.get("mtime_ns"):
            changed.append(rel)
    return changed


def drop(folder: Path, files: list[str]) -> None:
    """Remove local copies that no longer match what was collected, so the backend fetches them again."""
    from runjob_core.collecting import destination

    for rel in files:
        target, _why = destination(folder, rel)  # the manifest is a file on disk: trust no name in it
        if target is not None and target.is_file():
            target.unlink()
