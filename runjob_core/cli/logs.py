"""runjob logs: print a job's log, only new bytes when following."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import open_context


@click.command("logs")
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the job ends.")
@click.option("-a", "--attempt", type=int, help="Attempt number (default: the latest).")
def command(job: str, follow: bool, attempt: int | None) -> None:
    """Print the log of JOB (id or name)."""
    from runjob_core.models import ACTIVE_STATES
    from runjob_core.errors import RunjobError

    context = open_context(quiet_kinds=("state",))
    try:
        row = context.store.find_job(job)
        chosen = context.store.attempt(row.id, attempt) if attempt else context.store.latest_attempt(row.id)
        if chosen is None or chosen.submission is None:
            raise RunjobError(f"job {row.id} has no submitted attempt, so no log yet")
        submission = chosen.submission
        transport = context.transport_for(submission)
        from runjob_core import _watch

        # The push path: the cluster's watcher wakes this loop when the log grows.
        if follow:
            _watch.enable(context)
        watch = _watch.for_submission(context, submission) if follow else None
        if watch is not None:
            watch.follow(row.id, submission.log_path)
        offset, delay = 0, 0.5
        while True:
            data = transport.read_from(submission.log_path, offset, 4 << 20)
            if data:
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                offset += len(data)
                delay = 0.5
                continue
            if not follow:
                break
            state = context.store.latest_attempt(row.id)
            if state is None or state.n != chosen.n or state.state not in ACTIVE_STATES:
                from runjob_core import monitor

                monitor.cycle(context, [row.id])
                state = context.store.attempt(row.id, chosen.n)
                if state.state not in ACTIVE_STATES and not transport.read_from(submission.log_path, offset, 1):
                    break
            woken = _watch.wait_for_wakeup(context, delay).get(row.id, set())
            if woken & {"marker:exit", "marker:end"}:
                from runjob_core import monitor

                monitor.cycle(context, [row.id])  # the job says it ended: ask the scheduler once
            delay = 0.5 if woken else min(delay * 1.5, 5.0)
    finally:
        _watch.close(context)
        context.close()
