"""Start, watch, cancel and collect jobs running on this machine.

Each attempt runs detached in its own session under the shared runner protocol of
:mod:`runjob_core.transport.detached` (the wrapper records its pid and writes the exit code
to a file atomically; status reads liveness first, the exit file second, so a job ending
between the reads is never taken for a lost one). The plugin keeps no per-attempt file of
its own: what it needs (pid, process start time, paths) is in ``Submission.extra``, which
the core stores. ``submit`` writes the runner's pid file in the job folder itself, atomically,
before it returns (the runner writes the same pid there when it runs, maybe later), so a
runjob killed between starting the runner and recording the submission finds the runner again
from that file (:func:`reattach`). The pid *and* its start time identify the runner, so a
reused pid is not mistaken for it. Status, by :func:`runjob_core.transport.detached.decide`:

* an exit-code file -> COMPLETED (0), TIMEOUT (124 from ``timeout``) or FAILED, or
  CANCELLED when the cancel marker came first (it is only written while there is no exit code);
* the runner alive -> RUNNING;
* otherwise the runner died without a word (the machine rebooted, someone killed it with
  SIGKILL) -> LOST.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from runjob_core.config import parse_duration
from runjob_core.errors import BackendError
from runjob_core.models import CANCELLED, LOST, PENDING, Artifact, JobStatus, Submission
from runjob_core.transport import detached

SOURCE = "runjob-local"
#: Seconds between SIGTERM and SIGKILL on cancel (time to save a checkpoint).
KILL_GRACE = float(detached.KILL_GRACE)


def _files(submission_or_layout_dir: str, n: int) -> detached.RunnerFiles:
    return detached.RunnerFiles(job_dir=submission_or_layout_dir, attempt=n)


def submit(job, attempt, rendered, cluster, context) -> Submission:
    layout = attempt.layout
    script = layout.script_path or f"{layout.job_dir}/{rendered.script_name}"
    files = _files(layout.job_dir, attempt.n)
    for stale in (files.exit, files.cancelled, files.pid):
        Path(stale).unlink(missing_ok=True)
    limit = parse_duration(job.resources.time) if job.resources.time else None
    from runjob_core.redact import log_filter

    # The job inherits the user's environment, tokens included: its output reaches the log
    # through the token redactor (issue 34 item 6).
    argv = detached.wrapper_argv(files, ["bash", script], limit, redact_with=log_filter())
    Path(layout.log_path).parent.mkdir(parents=True, exist_ok=True)
    extra = {"exit_file": files.exit, "cancel_file": files.cancelled}
    if job.resources.gpus > 0:
        # The job's own GPUs (CUDA_VISIBLE_DEVICES), now or when they free up: runjob_local._gpus.
        from runjob_local import _gpus

        extra.update(_gpus.place(context, cluster, job, attempt, argv, layout.workdir, layout.log_path, _starter(context)))
    else:
        pid, start_time = _starter(context)(argv, layout.workdir, layout.log_path, None)
        _record_pid(files, pid)
        extra.update(pid=str(pid), start_time=start_time, started_at=repr(time.time()))
    job_id = f"local-{extra['pid']}" if "pid" in extra else f"local-queued-{attempt.job_id}-{attempt.n}"
    return attempt.submission(backend="local", cluster=cluster.name, backend_job_id=job_id, source=SOURCE, extra=extra)


def _record_pid(files: detached.RunnerFiles, pid: int) -> None:
    """The runner's pid file, written before submit returns (atomically, as the runner writes
    it): :func:`reattach` must find a runner that started, however late it runs its first line."""
    tmp = Path(f"{files.pid}.submit")
    tmp.write_text(f"{pid}\n")
    tmp.replace(files.pid)


def _starter(context):
    """start(argv, cwd, log_path, env) -> (pid, start time): the runner, detached."""

    def start(argv, cwd, log_path, env):
        try:
            started = context.run(argv, cwd=cwd, detach=True, output_path=log_path, env=env)
        except OSError as exc:
            raise BackendError(f"could not start the job on this machine: {exc}") from None
        return started.pid, detached.process_start_time(started.pid) or ""

    return start


def reattach(attempt, cluster_name: str, context) -> Submission | None:
    """The attempt's runner, found from what is in its job folder (no record of ours): a
    GPU-queue row for the tag (it waits for GPUs), else the runner's pid file (``submit``
    removes a stale one before starting and writes the new one before it returns, so one
    there is this attempt's). ``None`` when neither exists: the runner never started and the
    core submits it."""
    layout = attempt.layout
    files = _files(layout.job_dir, attempt.n)
    extra = {"exit_file": files.exit, "cancel_file": files.cancelled}
    from runjob_local import _gpus

    if _gpus.row(context, attempt.tag) is not None:
        job_id = f"local-queued-{attempt.job_id}-{attempt.n}"
    else:
        try:
            pid_text = Path(files.pid).read_text().strip()
            started_at = Path(files.pid).stat().st_mtime
        except FileNotFoundError:
            return None
        if not pid_text.isdigit():
            return None
        # A runner already gone gets a start time no process has: it is then never taken
        # for a live one under a reused pid; its exit file (or LOST) decides.
        start_time = detached.process_start_time(int(pid_text)) or "gone"
        extra.update(pid=pid_text, start_time=start_time, started_at=repr(started_at))
        job_id = f"local-{pid_text}"
    return attempt.submission(backend="local", cluster=cluster_name, backend_job_id=job_id, source=SOURCE, extra=extra)


def _status(submission: Submission, context) -> JobStatus:
    extra = submission.extra
    # When the runner started: a job that ends between two polls still has its run time (GPU-hours).
    started = extra.get("started_at")
    if "pid" not in extra:  # it waited for GPUs: the queue knows whether it started since
        from runjob_local import _gpus

        queued = _gpus.row(context, submission.tag)
        if (queued is None or queued["state"] == "queued") and Path(submission.extra["cancel_file"]).exists():
            return JobStatus(state=CANCELLED, source=SOURCE, reason="cancelled while waiting for GPUs",
                             ended_at=Path(submission.extra["cancel_file"]).stat().st_mtime)
        if queued is None:
            return JobStatus(state=LOST, source=SOURCE, reason="it left the GPU queue without starting")
        if queued["state"] == "queued":
            return JobStatus(state=PENDING, source=SOURCE, reason=queued["reason"] or "waiting for GPUs")
        extra, started = {"pid": queued["pid"], "start_time": queued["start_time"]}, queued["started_at"]
    files = _files(submission.job_dir, submission.attempt)
    state = detached.read_local(files, int(extra["pid"]), extra.get("start_time") or None)
    return detached.decide(state, source=SOURCE, started_at=float(started) if started else None)


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
        files = _files(submission.job_dir, submission.attempt)
        # No marker once the job has its exit code: a late cancel must not rename its ending.
        if not Path(files.exit).exists():
            Path(files.cancelled).write_text(str(time.time()))
        extra = submission.extra
        if "pid" not in extra:  # a job waiting for GPUs leaves the queue (or is killed, if it just started)
            from runjob_local import _gpus

            extra = _gpus.forget(context, submission.tag) or {}
        if extra.get("pid") and detached.process_start_time(int(extra["pid"])) == extra.get("start_time"):
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

