"""The one place in runjob that starts a process.

Everything that spawns (the local transport, the local backend, benchmarks' helpers)
calls :func:`run`, so a test can record or replay every command through
:func:`runjob_core.testing.fake_run`-style replacement of :data:`RUNNER`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Completed:
    """The outcome of one command (or, for a detached start, its pid)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""
    pid: int | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _spawn(
    argv: Sequence[str],
    *,
    input: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    detach: bool = False,
    output_path: str | None = None,
) -> Completed:
    argv = tuple(str(a) for a in argv)
    full_env = None if env is None else {**os.environ, **env}
    if detach:
        # Own session and process group: the job outlives runjob, and cancel can kill
        # the whole group. Output goes straight to a file, never through a pipe we would
        # have to keep draining.
        # A job's log is the user's alone (0600 when runjob creates it): it may hold what the job printed.
        out = open(os.open(output_path or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            out.close()
        return Completed(argv, 0, pid=proc.pid)
    proc = subprocess.run(
        argv,
        input=input,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
        capture_output=True,
        text=True,
        errors="replace",
    )
    return Completed(argv, proc.returncode, proc.stdout, proc.stderr)


#: The function :func:`run` delegates to; tests replace it to record or script commands.
RUNNER: Callable[..., Completed] = _spawn


def run(
    argv: Sequence[str],
    *,
    input: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    detach: bool = False,
    output_path: str | None = None,
) -> Completed:
    """Run *argv* (never through a shell) and return its outcome.

    With ``detach=True`` the process is started in its own session with stdout and
    stderr appended to *output_path*, and :func:`run` returns at once with its ``pid``.
    """
    return RUNNER(argv, input=input, cwd=cwd, env=env, timeout=timeout, detach=detach, output_path=output_path)


def stream(argv: Sequence[str]) -> subprocess.Popen:
    """Start *argv* with its stdin and stdout as byte pipes (a long-running watcher that
    reads commands and prints lines); stderr is dropped. Closing stdin asks it to stop."""
    return subprocess.Popen(tuple(str(a) for a in argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, close_fds=True)
