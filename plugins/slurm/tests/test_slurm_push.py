"""The push path on the real SLURM cluster: the remote watcher wakes the monitor, and the
poll still finishes a job whose watcher was killed.

The wake-up tests give the monitor a 60 s poll cadence: a job of a few seconds can only be
seen to end through the watcher. They assert on what the events record (which path
noticed, how many scheduler polls), not on elapsed time.
"""

import uuid

import attrs
import pytest

from runjob_core import lifecycle, monitor

from runjob_core.monitor import Monitor
from runjob_core.monitor import push as _watch
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm


@pytest.fixture
def ctx(runjob_home, slurm_env):
    cluster = slurm_cluster_config(slurm_env)
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def submit(ctx, name, command):
    job = BackendContract().job_spec(name, command)
    return lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))


def squeues(ctx):
    """The scheduler polls the transport ran. The one `squeue --me` listing at submit (is a job with this
    spec's tag already running? see runjob_list_tagged) is not a poll of the job: it is left out."""
    return [c for c in ctx.transport(ctx.clusters["under-test"]).commands
            if " squeue " in f" {c}" and "squeue --me" not in c]


def gated(ctx, name, command):
    """`command` held until a monitor cycle has seen the job running with none of the watcher's
    news about it left unread: the job cannot end before the monitor has seen it run, however
    loaded the machine is (a bare `sleep 1` could, and then the first cycle's poll, or the poll
    its start marker asked for, noticed the end instead of its end markers). Returns the job's
    command and the on_cycle callback that opens the gate."""
    gate = f"/tmp/runjob-test-gate-{name}-{uuid.uuid4().hex[:8]}"
    transport = ctx.transport(ctx.clusters["under-test"])
    push = Monitor.of(ctx).push

    def open_gate(result):
        running = [job_id for job_id, view in result.views.items() if view.state == "RUNNING"]
        with push.bell:
            unread = any(job_id in w.pending for w in push.watches() for job_id in running)
        if not opened and running and not unread:
            opened.append(gate)
            assert transport.run(["touch", gate]).ok

    opened: list[str] = []
    return f"while [ ! -e {gate} ]; do sleep 0.2; done; rm -f {gate}; {command}", open_gate


def watcher_up(ctx):
    """The cluster's watcher started, and alive, before the job is submitted. inotifywait -r
    adds its watch on the log folder after the folders under it, so a job whose marker folder
    appears during that scan is never heard ending (runjob then polls it as if there were no
    watcher, Watch.uncertain); these tests are about the watcher hearing the end."""
    cluster = ctx.clusters["under-test"]
    push = Monitor.of(ctx).push
    push.enable()
    watch = push.for_cluster(cluster)
    assert watch is not None
    # A watcher starts for the log folder of the first job followed: a stand-in job's log.
    logs = ctx.transport(cluster).expand(cluster.scratch_path) + "/logs"
    watch.follow("warm-up", f"{logs}/warm-up.out")
    wait_until(lambda: watch.alive, timeout=60, interval=0.1, what="the watcher to come alive")
    watch.unfollow("warm-up")
    watch.pending.clear()


def terminal_event(ctx, job_id):
    states = [e for e in ctx.store.events(job_id, kinds=("state",)) if e.data.get("state") not in ("PENDING", "RUNNING")]
    assert len(states) == 1, [e.message for e in states]
    return states[0]


@pytest.mark.parametrize("how", ["inotify", "stat"])
def test_the_watcher_reports_the_end_and_one_poll_confirms_it(ctx, monkeypatch, how):
    monkeypatch.setenv("RUNJOB_WATCH", how)
    watcher_up(ctx)
    command, open_gate = gated(ctx, f"push-{how}", "sleep 1; echo finished-line")
    row, _ = submit(ctx, f"push-{how}", command)
    history: list[str] = []

    def on_cycle(result):
        history.extend(w.state for w in Monitor.of(ctx).push.watches())
        open_gate(result)

    monitor.watch(ctx, [row.id], min_interval=60.0, max_interval=60.0, on_cycle=on_cycle)
    attempt = ctx.store.latest_attempt(row.id)
    assert attempt.state == "COMPLETED" and attempt.exit_code == 0
    assert f"alive {how}" in " ".join(history)
    event = terminal_event(ctx, row.id)
    assert event.data["trigger"] == "watcher"
    # Its end markers, or the re-polls an end marker starts while SLURM is still finishing the
    # job ("confirm"), or, if the job beat the watcher's start, the look every followed job
    # gets when a watcher comes alive ("resync"), or the poll its last log line woke, when
    # that poll already found the job ended (a loaded machine: the line and the end come
    # within one poll's round trip; seen on a full run).
    assert {"marker:exit", "marker:end", "confirm", "resync", "log"} & set(event.data["causes"])
    # Every scheduler poll after the first cycle's was asked for by the watcher: the job's
    # start, then its end, confirmed by that poll or by a short series of re-polls while
    # SLURM was still finishing the job (how many depends on the machine's load).
    assert len(squeues(ctx)) == 1 + event.data["wake_polls"]
    if {"marker:exit", "marker:end", "confirm"} & set(event.data["causes"]):  # an end marker drove it
        assert 1 <= event.data["ending_polls"] <= 1 + len(_watch.CONFIRM_DELAYS)
        assert event.data["wake_polls"] >= event.data["ending_polls"]
    log = ctx.transport(ctx.clusters["under-test"]).read_from(attempt.submission.log_path, 0)
    assert b"finished-line" in log


def test_the_shared_agent_runs_the_watcher_for_its_clients(ctx, monkeypatch):
    monkeypatch.setenv("RUNJOB_SSH_AGENT", "1")
    ctx.close()  # reopen so the transport is the agent's
    context = lifecycle.open_context()
    try:
        watcher_up(context)
        command, open_gate = gated(context, "push-agent", "sleep 1; echo via-agent")
        row, _ = submit(context, "push-agent", command)
        monitor.watch(context, [row.id], min_interval=60.0, max_interval=60.0, on_cycle=open_gate)
        assert context.store.latest_attempt(row.id).state == "COMPLETED"
        events = [(e.kind, e.message, e.data) for e in context.store.events(row.id)]
        assert terminal_event(context, row.id).data["trigger"] == "watcher", events
    finally:
        context.close()


def test_a_killed_watcher_leaves_the_poll_to_finish_the_job(ctx, monkeypatch):
    monkeypatch.setenv("RUNJOB_WATCH", "inotify")
    monkeypatch.setenv("RUNJOB_WATCH_RESTART", "3600")  # stays dead for this test
    row, _ = submit(ctx, "push-killed", "sleep 6; echo after-the-kill; exit 0")
    transport = ctx.transport(ctx.clusters["under-test"])
    killed: list[int] = []

    def kill_once_running(result):
        watch = Monitor.of(ctx).push.watches()[0] if Monitor.of(ctx).push.watches() else None
        view = result.views.get(row.id)
        if not killed and watch is not None and watch.alive and view is not None and view.state == "RUNNING":
            killed.append(watch.pid)
            assert transport.run(["kill", str(watch.pid)]).ok

    monitor.watch(ctx, [row.id], min_interval=0.5, max_interval=2.0, on_cycle=kill_once_running)
    assert killed, "the job ended before the watcher could be killed"
    attempt = ctx.store.latest_attempt(row.id)
    assert attempt.state == "COMPLETED" and attempt.exit_code == 0
    event = terminal_event(ctx, row.id)
    assert event.data["trigger"] == "poll"
    assert b"after-the-kill" in transport.read_from(attempt.submission.log_path, 0)
    still = transport.run(["sh", "-c", f"kill -0 {killed[0]} 2>/dev/null && echo alive || echo gone"])
    assert still.stdout.strip() == "gone"
