"""The detached-runner protocol: a job that outlives the command that started it.

A backend that runs jobs on a machine it reaches through a :class:`Transport` (this
machine, a pod, any host over SSH) starts each attempt as ``bash -c WRAPPER`` in its own
session. The wrapper records its pid, runs the job script (under ``timeout`` for a time
limit) and writes the exit code to a file atomically. Status is read from three files and
the process table, **in this order**:

1. is the wrapper alive (``/proc/<pid>/stat``, a zombie counts as gone)?
2. then the exit-code file, then the cancel marker.

The order is the whole point. Read the other way round, a job that ends between the two
reads shows neither an exit code (not written yet) nor a live process (gone by then), and is
recorded LOST ("ended without an exit code") although it completed. Read this way, a process
seen gone has written its exit code already, so the read that follows finds it.

:func:`start_command`, :func:`status_command` and :func:`cancel_command` give the shell
text for a remote host; :func:`read_local` reads the same state in-process (no shell per
poll) for this machine; :func:`decide` turns either into a :class:`JobStatus`. The local and
RunPod backends both use this module; a third-party backend of the same kind should too
(``docs/plugin-authors.md``).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import attrs

from runjob_core.models import CANCELLED, COMPLETED, FAILED, LOST, PENDING, RUNNING, TIMEOUT, JobStatus

#: The wrapper run in its own session: $1 pid file, $2 exit-code file, then the command. The
#: pid file is replaced atomically (a reader never sees it empty): the local backend writes
#: the same pid into it before its submit returns, and the wrapper's own write may come later.
WRAPPER = ('echo "$$" > "$1.tmp" && mv -f "$1.tmp" "$1"; rc_file="$2"; shift 2; "$@"; rc=$?; '
           'echo "$rc" > "$rc_file.tmp" && mv "$rc_file.tmp" "$rc_file"; exit "$rc"')
#: The same, with the command's output piped through a filter ($3 python, $4 the filter's
#: file, run as ``python -S -I``): the local backend's token redactor. The exit code is the
#: command's own (PIPESTATUS), not the filter's.
FILTERED_WRAPPER = ('echo "$$" > "$1.tmp" && mv -f "$1.tmp" "$1"; rc_file="$2"; python="$3"; redactor="$4"; shift 4; '
                    '"$@" 2>&1 | "$python" -S -I "$redactor"; rc=${PIPESTATUS[0]}; '
                    'echo "$rc" > "$rc_file.tmp" && mv "$rc_file.tmp" "$rc_file"; exit "$rc"')
#: ``timeout``'s exit code when the time limit ended the job.
TIMEOUT_EXIT = 124
#: Seconds between SIGTERM and SIGKILL on cancel (time to save a checkpoint).
KILL_GRACE = 10


@attrs.frozen
class RunnerFiles:
    """The files of one attempt in its job folder."""

    job_dir: str
    attempt: int

    @property
    def pid(self) -> str:
        return f"{self.job_dir}/pod-pid.{self.attempt}"

    @property
    def exit(self) -> str:
        return f"{self.job_dir}/exit.{self.attempt}"

    @property
    def cancelled(self) -> str:
        return f"{self.job_dir}/cancelled.{self.attempt}"


@attrs.frozen
class RunnerState:
    """What one status read saw (liveness read first)."""

    exit_code: int | None
    cancelled: bool
    started: bool
    alive: bool
    log_size: int | None = None


def wrapper_argv(files: RunnerFiles, command: list[str], time_limit: int | None, *,
                 redact_with: tuple[str, str] | None = None) -> list[str]:
    """``bash -c WRAPPER`` around *command*, under ``timeout`` when there is a time limit
    (SIGTERM at the limit so the job may save, SIGKILL 30 s later; exit 124 = TIMEOUT).
    *redact_with* (python, filter file) pipes the output through that filter first."""
    if time_limit:
        command = ["timeout", "-k", "30", str(time_limit), *command]
    if redact_with is not None:
        return ["bash", "-c", FILTERED_WRAPPER, "runjob-runner", files.pid, files.exit, *redact_with, *command]
    return ["bash", "-c", WRAPPER, "runjob-runner", files.pid, files.exit, *command]


def start_command(files: RunnerFiles, command: list[str], *, workdir: str, log: str, time_limit: int | None) -> str:
    """The shell line that starts the job detached and returns once its pid is recorded."""
    q = shlex.quote
    wrapper = shlex.join(wrapper_argv(files, command, time_limit))
    return (f"mkdir -p {q(log.rsplit('/', 1)[0])} && cd {q(workdir)} && "
            # Braces: only the job goes to the background, not the whole && list (whose
            # shell would hold the session's descriptors until the job ends).
            f"{{ nohup setsid {wrapper} >> {q(log)} 2>&1 < /dev/null & }}; "
            # Return once the wrapper recorded its pid (at most 10 s): a poll right after
            # submit then sees the job as started, never as not there yet.
            f"i=0; while [ ! -s {q(files.pid)} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done")


def status_command(files: RunnerFiles, log: str) -> str:
    """One shell command printing the state: liveness FIRST, then exit code and marker."""
    q = shlex.quote
    return (f"p=$(cat {q(files.pid)} 2>/dev/null); s=; "
            # /proc/<pid>/stat field 3 is the state; a zombie (Z) has ended.
            '[ -n "$p" ] && s=$(sed -e "s/^.*) //" /proc/"$p"/stat 2>/dev/null | cut -d" " -f1); '
            f"e=$(cat {q(files.exit)} 2>/dev/null); c=; [ -e {q(files.cancelled)} ] && c=1; "
            f"l=$(stat -c %s {q(log)} 2>/dev/null); "
            'echo "exit=$e cancelled=$c started=${p:+1} alive=$s log=$l"')


def parse_status(text: str) -> RunnerState:
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    code, state, size = fields.get("exit", ""), fields.get("alive", ""), fields.get("log", "")
    return RunnerState(
        exit_code=int(code) if code.lstrip("-").isdigit() else None, cancelled=fields.get("cancelled") == "1",
        started=fields.get("started") == "1", alive=bool(state) and state not in ("Z", "X"),
        log_size=int(size) if size.isdigit() else None,
    )


def cancel_command(files: RunnerFiles) -> str:
    """Mark the attempt cancelled, TERM its process group, KILL it after a grace period."""
    q = shlex.quote
    # No marker once the job has its exit code: a late cancel must not rename its ending.
    return (f"[ -e {q(files.exit)} ] || touch {q(files.cancelled)}; p=$(cat {q(files.pid)} 2>/dev/null); "
            '[ -n "$p" ] && kill -TERM -- -"$p" 2>/dev/null; '
            # The whole list in the background with its descriptors closed, or the session
            # would wait for the grace period.
            f'{{ [ -n "$p" ] && sleep {KILL_GRACE} && kill -KILL -- -"$p"; }} >/dev/null 2>&1 < /dev/null & '
            "true")


def process_start_time(pid: int) -> str | None:
    """The start time of live process *pid* (``/proc/<pid>/stat`` field 22), ``None`` when
    it is gone or a zombie. With the pid it identifies a process: pids are reused."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    state, start = fields[0], fields[19]
    return None if state == "Z" else start


def read_local(files: RunnerFiles, pid: int, start_time: str | None) -> RunnerState:
    """:func:`status_command`'s reading, in-process, for a runner on this machine: liveness
    FIRST (same pid *and* start time, so a reused pid is not taken for the job)."""
    alive = process_start_time(pid) == start_time if start_time else process_start_time(pid) is not None
    exit_file = Path(files.exit)
    try:
        text = exit_file.read_text().strip()
    except FileNotFoundError:
        text = ""
    code = int(text) if text.lstrip("-").isdigit() else None
    cancelled = Path(files.cancelled).exists()
    return RunnerState(exit_code=code, cancelled=cancelled, started=True, alive=alive)


def decide(state: RunnerState, *, source: str, started_at: float | None = None, node: str | None = None) -> JobStatus:
    """The job's status from one reading (the same rule for every detached runner)."""
    now = time.time()
    if state.exit_code is not None:
        code = state.exit_code
        if state.cancelled:
            # The marker is only written while there is no exit code: the cancel came first.
            return JobStatus(state=CANCELLED, source=source, exit_code=code, reason="cancelled", started_at=started_at,
                             ended_at=now, node=node)
        if code == 0:
            return JobStatus(state=COMPLETED, source=source, exit_code=0, started_at=started_at, ended_at=now, node=node)
        if code == TIMEOUT_EXIT:
            return JobStatus(state=TIMEOUT, source=source, exit_code=code, reason="time limit", started_at=started_at,
                             ended_at=now, node=node)
        return JobStatus(state=FAILED, source=source, exit_code=code, reason=f"exit code {code}", started_at=started_at,
                         ended_at=now, node=node)
    if state.alive:
        return JobStatus(state=RUNNING, source=source, started_at=started_at, node=node)
    if state.cancelled:
        return JobStatus(state=CANCELLED, source=source, reason="cancelled", started_at=started_at, ended_at=now, node=node)
    if state.started:
        return JobStatus(state=LOST, source=source, started_at=started_at, ended_at=now, node=node,
                         reason="its runner process is gone and left no exit code (machine rebooted or process killed)")
    return JobStatus(state=PENDING, source=source, node=node, reason="starting")
