"""Where a collected file may land: inside ``results/<name>/``, whatever the job named it.

A job's results folder is written by the job, so its file names are the job's (or an
attacker's) choice: newlines, ``..`` parts, leading dashes, bytes that are not UTF-8.
Backends list remote files NUL-separated and pass every relative path through
:func:`destination` before writing anything; what cannot be placed safely is skipped with
a ``problem`` artifact (a warning: the rest is still collected).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from runjob_core.models import ARTIFACT_PROBLEM, Artifact

if TYPE_CHECKING:
    from runjob_core.store import JobRow


def results_folder(row: JobRow) -> Path:
    """``results/<name>/`` (``results/<name>-canary/`` for a canary), relative to the working
    folder: where collect brings a job's results and where the report reads them."""
    suffix = "-canary" if row.kind == "canary" else ""
    return Path("results") / f"{row.name}{suffix}"


def destination(dest: Path, rel: str) -> tuple[Path | None, str]:
    """The local path for the remote file *rel* under *dest*, or (None, why not)."""
    if "\ufffd" in rel or not _utf8(rel):
        return None, "its name is not UTF-8 text, so it cannot be named safely here"
    if not rel or rel.startswith("/") or "\0" in rel:
        return None, "its name is not a relative path"
    parts = PurePosixPath(rel).parts
    if any(part in (".", "..") for part in rel.split("/")) or not parts:
        return None, "its path has '.' or '..' parts"
    root = dest.resolve()
    target = dest.joinpath(*parts)
    # resolve() follows symlinks already in the local folder: a link planted there earlier
    # must not carry a download out of it either.
    try:
        resolved = target.resolve()
    except OSError as exc:
        return None, f"its local path cannot be used ({exc.strerror})"
    if resolved != root and root not in resolved.parents:
        return None, f"it would land outside {dest}"
    return target, ""


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")  # a local name that is not UTF-8 holds surrogate escapes
    except UnicodeEncodeError:
        return False
    return True


def skipped(rel: str, why: str, source: str) -> Artifact:
    shown = rel.encode("utf-8", "replace").decode().replace("\ufffd", "?").replace("\n", "\\n")
    return Artifact(name="results", kind=ARTIFACT_PROBLEM, location=shown, source=source,
                    data={"severity": "warning", "message": f"skipped {shown!r}: {why}"})


def count_rows(path: Path) -> int:
    if not path.name.endswith(".jsonl"):
        return 0
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def copy_tree(source: Path, dest: Path, source_label: str) -> tuple[list[str], int, int, list[Artifact]]:
    """Copy the files under the local folder *source* into *dest* (only those that changed),
    each through :func:`destination`: ``(files, copied, rows, problems)``. Symlinks are not
    followed: a job's link must not bring a file from elsewhere on this machine."""
    import shutil

    files, copied, rows, problems = [], 0, 0, []
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(source).as_posix()
        target, why = destination(dest, rel)
        if target is None:
            problems.append(skipped(rel, why, source_label))
            continue
        files.append(rel)
        st = path.stat()
        if not (target.exists() and target.stat().st_size == st.st_size and target.stat().st_mtime >= st.st_mtime):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied += 1
        rows += count_rows(path)
    return files, copied, rows, problems
