"""Start, watch, cancel and collect jobs running on this machine.

Each attempt runs as ``bash -c WRAPPER`` in its own session: the wrapper runs the job
script (under ``timeout`` when the job has a time limit) and writes the exit code to a
file. A record per attempt (``.runjob/local/<tag>.json``: pid, process start time, paths)
lets a restarted runjob find the job again. Status comes from that record:

* an exit-code file -> COMPLETED (0), TIMEOUT (124 from ``timeout``) or FAILED;
* a cancel marker -> CANCELLED (unless the exit-code file is older: the job had ended);
* the wrapper still alive (same pid *and* start time, so a reused pid is not mistaken
  for it) -> RUNNING;
* otherwise the runner died without a word (the machine rebooted, someone killed it with
  SIGKILL) -> LOST.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

from runjob_core.config import parse_duration
from runjob_core.errors import BackendError
from runjob_core.models import CANCELLED, COMPLETED, FAILED, LOST, RUNNING, TIMEOUT, Artifact, JobStatus, Submission

SOURCE = "runjob-local"
TIMEOUT_EXIT = 124
# The wrapper: the job's output through the token redactor into the log (the job inherits
# the user's environment, tokens included), its exit code to a file, written atomically;
# `timeout` gives the job a time limit.
_WRAPPER = ('rc_file="$1"; python="$2"; redactor="$3"; shift 3; "$@" 2>&1 | "$python" -S -I "$redactor"; '
            'rc=${PIPESTATUS[0]}; echo "$rc" > "$rc_file.tmp" && mv "$rc_file.tmp" "$rc_file"; exit "$rc"')
#: Seconds between SIGTERM and SIGKILL on cancel (time to save a checkpoint).
KILL_GRACE = 10.0


def _records_dir(context) -> Path:
    folder = context.state_dir / "local"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _record_path(context, tag: str) -> Path:
    return _records_dir(context) / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".json")


def _process_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    state, start = fields[0], fields[19]
    return None if state == "Z" else start


def submit(job, attempt, rendered, cluster, context) -> Submission:
    layout = attempt.layout
    script = layout.script_path or f"{layout.job_dir}/{rendered.script_name}"
    exit_file = f"{layout.job_dir}/exit.{attempt.n}"
    cancel_file = f"{layout.job_dir}/cancelled.{attempt.n}"
    for stale in (exit_file, cancel_file):
        Path(stale).unlink(missing_ok=True)
    command = ["bash", script]
    if job.resources.time:
        # SIGTERM at the limit (the job may save), SIGKILL 30 s later; exit 124 = TIMEOUT.
        command = ["timeout", "-k", "30", str(parse_duration(job.resources.time)), *command]
    from runjob_core import _log_redactor

    argv = ["bash", "-c", _WRAPPER, "runjob-local", exit_file, sys.executable, _log_redactor.__file__, *command]
    Path(layout.log_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        started = context.run(argv, cwd=layout.workdir, detach=True, output_path=layout.log_path)
    except OSError as exc:
        message = f"could not start the job on this machine: {exc}"
        raise BackendError(message) from None
    pid = started.pid
    extra = {
        "pid": str(pid), "start_time": _process_start_time(pid) or "", "exit_file": exit_file, "cancel_file": cancel_file,
    }
    submission = attempt.submission(backend="local", cluster=cluster.name, backend_job_id=f"local-{pid}", source=SOURCE, extra=extra)
    from runjob_core.config import record_to_json

    _record_path(context, attempt.tag).write_text(record_to_json(submission))
    return submission


def reattach(tag: str, context) -> Submission | None:
    path = _record_path(context, tag)
    if not path.is_file():
        return None
    from runjob_core.config import record_from_json

    return record_from_json(path.read_text(), Submission)


def _status(submission: Submission) -> JobStatus:
    extra = submission.extra
    exit_file = Path(extra["exit_file"])
    cancel_file = Path(extra["cancel_file"])
    cancelled_at = cancel_file.stat().st_mtime if cancel_file.exists() else None
    # A job that had ended before the cancel keeps its own ending.
    if cancelled_at is not None and not (exit_file.exists() and exit_file.stat().st_mtime < cancelled_at):
        return JobStatus(state=CANCELLED, source=SOURCE, reason="cancelled", ended_at=cancelled_at)
    if exit_file.exists():
        text = exit_file.read_text().strip()
        code = int(text) if text.lstrip("-").isdigit() else None
        ended = exit_file.stat().st_mtime
        if code == 0:
            return JobStatus(state=COMPLETED, source=SOURCE, exit_code=0, ended_at=ended)
        if code == TIMEOUT_EXIT:
            return JobStatus(state=TIMEOUT, source=SOURCE, exit_code=code, reason="time limit", ended_at=ended)
        return JobStatus(state=FAILED, source=SOURCE, exit_code=code, reason=f"exit code {code}", ended_at=ended)
    pid = int(extra["pid"])
    start = _process_start_time(pid)
    if start is not None and start == extra.get("start_time"):
        return JobStatus(state=RUNNING, source=SOURCE)
    return JobStatus(state=LOST, source=SOURCE,
                     reason="its runner process is gone and left no exit code (machine rebooted or process killed)")


def poll(submissions) -> dict[str, JobStatus]:
    # Local polling is a few stat() calls per job: batched trivially.
    return {s.backend_job_id: _status(s) for s in submissions}


def cancel(submissions) -> list[str]:
    done = []
    for submission in submissions:
        Path(submission.extra["cancel_file"]).write_text(str(time.time()))
        pid = int(submission.extra["pid"])
        if _process_start_time(pid) == submission.extra.get("start_time"):
            _kill_group(pid)
        done.append(submission.backend_job_id)
    return done


def _group_alive(pgid: int) -> bool:
    """True while a process of group *pgid* is alive (zombies do not count: a job started
    by this very process stays a zombie until reaped, and kill(0) would still succeed)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return  # not our child: its own parent (init) reaps it


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + KILL_GRACE
    while time.monotonic() < deadline:
        _reap(pgid)
        if not _group_alive(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _reap(pgid)


def measured_memory(submission: Submission, context, job=None) -> Artifact | None:
    """The GPU peak the job's log reports, next to the estimate of its spec, as the SLURM
    plugin records it (:func:`runjob_core.estimator.measured.log_file_artifact`)."""
    from runjob_core.estimator import measured

    if not Path(submission.log_path).is_file():
        return None
    job = job or context.store.get_job(submission.job_id).spec
    return measured.log_file_artifact(job, context.clusters[submission.cluster], submission.log_path, SOURCE)


def collect(submission: Submission, dest: Path) -> list[Artifact]:
    """Copy the job's results folder into *dest* (only files that changed)."""
    source = Path(submission.results_dir)
    if not source.is_dir():
        return []
    from runjob_core import collecting

    files, copied, rows, problems = collecting.copy_tree(source, dest, SOURCE)
    if not files:
        return problems
    return [Artifact(name="results", kind="results", location=str(dest), source=SOURCE, rows=rows,
                     data={"files": files, "copied": copied, "from": str(source)}), *problems]

