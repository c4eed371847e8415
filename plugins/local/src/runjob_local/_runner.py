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
import time
from pathlib import Path

import attrs

from runjob_core.config import parse_duration
from runjob_core.errors import BackendError
from runjob_core.models import CANCELLED, COMPLETED, FAILED, LOST, PENDING, RUNNING, TIMEOUT, Artifact, JobStatus, Submission

SOURCE = "runjob-local"
TIMEOUT_EXIT = 124
# The wrapper: exit code to a file, written atomically; `timeout` gives the job a time limit.
_WRAPPER = 'rc_file="$1"; shift; "$@"; rc=$?; echo "$rc" > "$rc_file.tmp" && mv "$rc_file.tmp" "$rc_file"; exit "$rc"'
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
    argv = ["bash", "-c", _WRAPPER, "runjob-local", exit_file, *command]
    Path(layout.log_path).parent.mkdir(parents=True, exist_ok=True)
    extra = {"exit_file": exit_file, "cancel_file": cancel_file}
    if job.resources.gpus > 0:
        # The job's own GPUs (CUDA_VISIBLE_DEVICES), now or when they free up: runjob_local._gpus.
        from runjob_local import _gpus

        extra.update(_gpus.place(context, cluster, job, attempt, argv, layout.workdir, layout.log_path, _starter(context)))
    else:
        pid, start_time = _starter(context)(argv, layout.workdir, layout.log_path, None)
        extra.update(pid=str(pid), start_time=start_time, started_at=repr(time.time()))
    job_id = f"local-{extra['pid']}" if "pid" in extra else f"local-queued-{attempt.job_id}-{attempt.n}"
    submission = attempt.submission(backend="local", cluster=cluster.name, backend_job_id=job_id, source=SOURCE, extra=extra)
    from runjob_core.config import record_to_json

    _record_path(context, attempt.tag).write_text(record_to_json(submission))
    return submission


def _starter(context):
    """start(argv, cwd, log_path, env) -> (pid, start time): the runner, detached."""

    def start(argv, cwd, log_path, env):
        try:
            started = context.run(argv, cwd=cwd, detach=True, output_path=log_path, env=env)
        except OSError as exc:
            raise BackendError(f"could not start the job on this machine: {exc}") from None
        return started.pid, _process_start_time(started.pid) or ""

    return start


def reattach(tag: str, context) -> Submission | None:
    path = _record_path(context, tag)
    if not path.is_file():
        return None
    from runjob_core.config import record_from_json

    return record_from_json(path.read_text(), Submission)


def _status(submission: Submission, context) -> JobStatus:
    status = _state(submission, context)
    # When the runner started: a job that ends between two polls still has its run time (GPU-hours).
    started = submission.extra.get("started_at")
    if "queued" in submission.extra:
        from runjob_local import _gpus

        started = (_gpus.row(context, submission.tag) or {}).get("started_at")
    if status.started_at is None and started:
        status = attrs.evolve(status, started_at=float(started))
    return status


def _state(submission: Submission, context) -> JobStatus:
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
    if "pid" not in extra:  # it waited for GPUs: the queue knows whether it started since
        from runjob_local import _gpus

        queued = _gpus.row(context, submission.tag)
        if queued is None:
            return JobStatus(state=LOST, source=SOURCE, reason="it left the GPU queue without starting")
        if queued["state"] == "queued":
            return JobStatus(state=PENDING, source=SOURCE, reason=queued["reason"] or "waiting for GPUs")
        extra = {"pid": queued["pid"], "start_time": queued["start_time"]}
    pid = int(extra["pid"])
    start = _process_start_time(pid)
    if start is not None and start == extra.get("start_time"):
        return JobStatus(state=RUNNING, source=SOURCE)
    return JobStatus(state=LOST, source=SOURCE,
                     reason="its runner process is gone and left no exit code (machine rebooted or process killed)")


def poll(submissions, cluster=None, context=None) -> dict[str, JobStatus]:
    # Local polling is a few stat() calls per job: batched trivially. Waiting GPU jobs whose
    # GPUs freed up are started first (first come, first served). A wrapper backend that runs
    # its jobs through this one without GPUs (tests/test_contract.py) may leave out the context.
    if context is not None and any("pid" not in s.extra for s in submissions):
        from runjob_local import _gpus

        _gpus.dispatch(context, cluster, _starter(context))
    return {s.backend_job_id: _status(s, context) for s in submissions}


def cancel(submissions, context=None) -> list[str]:
    done = []
    for submission in submissions:
        Path(submission.extra["cancel_file"]).write_text(str(time.time()))
        extra = submission.extra
        if "pid" not in extra:  # a job waiting for GPUs leaves the queue (or is killed, if it just started)
            from runjob_local import _gpus

            extra = _gpus.forget(context, submission.tag) or {}
        if extra.get("pid") and _process_start_time(int(extra["pid"])) == extra.get("start_time"):
            _kill_group(int(extra["pid"]))
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

