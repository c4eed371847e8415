"""Offline health scans: a log file fed to every installed checker through
``runjob_check_health``, exactly as the monitor feeds a running job's log.

The file is one *scan* submission (``backend == "scan"``): its windows are the file's
complete lines (``\r`` ends one too), in chunks, while its status is ``RUNNING``-free
``PENDING`` (no stall or disk checks: there is no live job); a last call with an empty
window and a ``COMPLETED`` status lets streaming checkers decide what was still open (a
traceback at the end).
"""

from __future__ import annotations

import time
from pathlib import Path

from runjob_core import plugins
from runjob_core.models import COMPLETED, PENDING, Finding, HealthPolicy, JobSpec, JobStatus, ModelSpec, Submission

#: Bytes read per window; checkers see complete lines only.
CHUNK_BYTES = 8 << 20
SOURCE = "runjob-scan"


def scan_submission(path: str | Path) -> Submission:
    """The stand-in submission of an offline scan of *path*."""
    path = str(Path(path).absolute())
    folder = str(Path(path).parent)
    return Submission(job_id="scan", attempt=1, backend="scan", cluster="scan", backend_job_id=path, tag=f"scan:{path}",
                      job_dir=folder, workdir=folder, log_path=path, results_dir=folder, checkpoint_dir=folder,
                      progress_path=folder + "/progress.json", submitted_at=time.time(), source=SOURCE)


def scan_file(context, path: str | Path, *, max_tokens: int | None = None, job: JobSpec | None = None,
              failures: list[str] | None = None) -> list[Finding]:
    """All findings of every installed checker on the file at *path*: whole-file scanners
    (``runjob_scan_log``) first, then the file as windows to every other checker. A checker
    that crashed is named in *failures* (if given) with the file of its traceback: the
    checks of this file are then incomplete."""
    job = job or JobSpec(name="scan", command="true", model=ModelSpec(max_tokens=max_tokens), health=HealthPolicy())
    submission = scan_submission(path)
    found: list[Finding] = []
    failures = [] if failures is None else failures
    crashed: set[str] = set()

    def failed(name: str, exc: BaseException) -> None:
        from runjob_core import _plugin_errors

        if name not in crashed:
            crashed.add(name)
            failures.append(_plugin_errors.describe(context, name, "runjob_check_health", exc))

    pm = context.pm
    answered: list = []
    # A whole-file scanner that breaks is named once; the file still goes to the others.
    found.extend(plugins.flatten(plugins.call_each(pm.hook.runjob_scan_log, {"job": job, "path": Path(path), "context": context},
                                                   on_error=failed, answered=answered)))
    caller = pm.subset_hook_caller("runjob_check_health", remove_plugins=answered) if answered else pm.hook.runjob_check_health
    if not caller.get_hookimpls():
        return found  # every checker scanned the whole file itself: no need to read it as text

    def call(window: str, status: JobStatus) -> None:
        kwargs = {"job": job, "submission": submission, "status": status, "window": window, "progress": None,
                  "cluster": None, "context": context}
        found.extend(plugins.flatten(plugins.call_each(caller, kwargs, on_error=failed)))

    waiting = JobStatus(state=PENDING, source=SOURCE)
    for window in _windows(path):
        call(window, waiting)
    call("", JobStatus(state=COMPLETED, source=SOURCE, reason="end of file"))
    return found


def _windows(path: str | Path):
    """The file as the monitor reads a log: windows of complete lines, ``\r`` ending a line
    as ``\n`` does (a progress bar redraws one line for hours); a line longer than a window
    is passed on in window-sized pieces, each ended as a line, so that what is held stays
    under two windows whatever the line length."""
    with open(path, "rb") as handle:
        rest = b""
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                break
            data = rest + chunk
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
            if len(data) - cut >= CHUNK_BYTES:
                yield data.decode("utf-8", "replace") + "\n"
                rest = b""
                continue
            rest = data[cut:]
            if cut:
                yield data[:cut].decode("utf-8", "replace")
        if rest:
            yield rest.decode("utf-8", "replace")
