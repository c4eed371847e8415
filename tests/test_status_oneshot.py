"""A one-shot cycle (`runjob status`, `watch --once`, the API's refresh) in a fresh process
writes nothing to the store when nothing changed, and leases a job only to record it."""

from __future__ import annotations

import sys
from pathlib import Path


from runjob_core import lifecycle, monitor

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from _recorded_queue import RecordedTransport, queued_context  # noqa: E402



def _fresh(transport: RecordedTransport):
    """A new context over the same state, as a new `runjob status` process opens."""
    context = lifecycle.open_context()
    context._transports[("rec", None)] = transport
    return context


def _lease_rows(context) -> list[tuple]:
    return context.store._db.execute("SELECT key, owner FROM leases").fetchall()


def test_an_unchanged_one_shot_status_writes_nothing_and_takes_no_lease(tmp_path):
    context, ids, transport = queued_context(tmp_path, 40)
    monitor.cycle(context, ids)  # the first sight records every job as queued
    context.close()

    status = _fresh(transport)
    try:
        before = status.store.generation()[1]
        taken = []
        real = status.store.try_leases
        status.store.try_leases = lambda keys, **kw: taken.extend(keys) or real(keys, **kw)
        result = monitor.cycle(status, ids)
        assert status.store.generation()[1] == before  # not one row written
        assert taken == [] and _lease_rows(status) == []
        assert {view.state for view in result.views.values()} == {"PENDING"}
    finally:
        status.close()


def test_a_one_shot_status_records_what_changed_under_a_lease_it_gives_back(tmp_path):
    context, ids, transport = queued_context(tmp_path, 40)
    monitor.cycle(context, ids)
    context.close()
    transport.text = transport.text.replace("100007|100007|PENDING|PartitionDown|N/A", "100007|100007|RUNNING|None|1796300330")

    status = _fresh(transport)
    try:
        taken = []
        real = status.store.try_leases
        status.store.try_leases = lambda keys, **kw: taken.extend(keys) or real(keys, **kw)
        result = monitor.cycle(status, ids)
        assert result.views[ids[7]].state == "RUNNING"
        assert status.store.latest_attempt(ids[7]).state == "RUNNING"
        assert taken == [f"observe:{ids[7]}"]  # only the job that had something to record
        assert _lease_rows(status) == []  # given back at the end of the cycle
    finally:
        status.close()


def test_a_one_shot_status_leaves_jobs_another_process_observes_to_it(tmp_path):
    context, ids, transport = queued_context(tmp_path, 10)
    monitor.cycle(context, ids, keep_leases=True)  # a `watch` that keeps observing every job
    transport.text = transport.text.replace("100003|100003|PENDING|PartitionDown|N/A", "100003|100003|RUNNING|None|1796300330")
    status = _fresh(transport)
    try:
        result = monitor.cycle(status, ids)
        # Shown as the store has it; recording the start is the watch's job, not ours.
        assert ids[3] in result.followed and result.views[ids[3]].state == "PENDING"
        assert status.store.latest_attempt(ids[3]).state == "PENDING"
        assert sorted(key for key, _ in _lease_rows(status)) == sorted(f"observe:{j}" for j in ids)
    finally:
        status.close()
        context.close()


def _status_cli(monkeypatch, transport, argv: list[str]) -> tuple[str, list[str], tuple]:
    """`runjob status ARGV` in this process over the recorded queue: its output, the SQL it ran
    after opening the store, and the store's (other commits, own changes) at the end."""
    from click.testing import CliRunner

    from runjob_core.cli import cli

    statements: list[str] = []
    opened = []
    real = lifecycle.open_context

    def traced(**kwargs):
        context = real(**kwargs)
        context._transports[("rec", None)] = transport
        context.store._db.set_trace_callback(statements.append)
        opened.append(context.store)
        return context

    monkeypatch.setattr(lifecycle, "open_context", traced)
    result = CliRunner().invoke(cli, ["status", *argv])
    assert result.exit_code == 0, result.output
    return result.output, statements, opened[0]._db.total_changes


def test_the_status_command_reads_the_store_in_queries_that_do_not_grow_with_the_jobs_listed(tmp_path, monkeypatch):
    """Issue 29: `runjob status` ran ~6 queries per listed job (130 for 20); now the same few for
    any number of jobs, and nothing written when nothing changed."""
    context, ids, transport = queued_context(tmp_path, 40)
    monitor.cycle(context, ids)
    context.close()
    counts = {}
    for limit in (5, 40):
        output, statements, changes = _status_cli(monkeypatch, transport, ["-n", str(limit)])
        assert output.count("PENDING") == limit
        assert changes == 0 and not [s for s in statements if s.split()[0].upper() in ("INSERT", "UPDATE", "DELETE", "REPLACE")]
        counts[limit] = len(statements)
    assert counts[5] == counts[40] <= 16, counts
