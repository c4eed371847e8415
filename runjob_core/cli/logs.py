"""runjob logs: print a job's log, only new bytes when following."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import find_job, open_context


@click.command("logs")
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the job ends.")
@click.option("-a", "--attempt", type=int, help="Attempt number (default: the latest).")
@click.option("--raw", is_flag=True, help="The bytes as the job wrote them: no redaction of tokens.")
def command(job: str, follow: bool, attempt: int | None, raw: bool) -> None:
    """Print the log of JOB (id or name)."""
    from runjob_core.errors import RunjobError
    from runjob_core.models import ACTIVE_STATES

    from runjob_core.monitor import Monitor

    context = open_context(quiet_kinds=("state",))
    monitor = Monitor.of(context)  # its push path wakes this loop; its cycle asks the scheduler
    try:
        row = find_job(context.store, job)
        chosen = context.store.attempt(row.id, attempt) if attempt else context.store.latest_attempt(row.id)
        if chosen is None or chosen.submission is None:
            raise RunjobError(f"job {row.id} has no submitted attempt, so no log yet")
        submission = chosen.submission
        transport = context.transport_for(submission)
        # The push path: the cluster's watcher wakes this loop when the log grows.
        if follow:
            monitor.push.enable()
        watch = monitor.push.for_submission(submission) if follow else None
        if watch is not None:
            watch.follow(row.id, submission.log_path)
        offset, delay = 0, 0.5
        out = _Writer(raw)
        while True:
            data = transport.read_from(submission.log_path, offset, 4 << 20)
            if data:
                out.write(data)
                offset += len(data)
                delay = 0.5
                continue
            if not follow:
                break
            state = context.store.latest_attempt(row.id)
            if state is None or state.n != chosen.n or state.state not in ACTIVE_STATES:
                monitor.cycle([row.id])
                state = context.store.attempt(row.id, chosen.n)
                if state.state not in ACTIVE_STATES and not transport.read_from(submission.log_path, offset, 1):
                    break
            woken = monitor.push.wait_for_wakeup(delay).get(row.id, set())
            if woken & {"marker:exit", "marker:end"}:
                monitor.cycle([row.id])  # the job says it ended: ask the scheduler once
            delay = 0.5 if woken else min(delay * 1.5, 5.0)
        out.flush()
    finally:
        monitor.push.close()
        context.close()


class _Writer:
    """Log bytes to stdout, tokens and secret values redacted line by line (unless raw)."""

    def __init__(self, raw: bool) -> None:
        self.raw, self.pending = raw, b""

    def write(self, data: bytes) -> None:
        if self.raw:
            sys.stdout.buffer.write(data)
        else:
            data, cut = self.pending + data, None
            cut = data.rfind(b"\n")
            if cut == -1:
                self.pending = data
                return
            self.pending = data[cut + 1:]
            self._emit(data[:cut + 1])
        sys.stdout.flush()

    def flush(self) -> None:
        if self.pending:
            self._emit(self.pending)
            self.pending = b""
        sys.stdout.flush()

    def _emit(self, data: bytes) -> None:
        from runjob_core.redact import redact

        sys.stdout.buffer.write(redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape"))
