import functools
"""The push path on this machine: the real watcher process (inotifywait and the stat loop),
what the monitor makes of its news, the job script's markers, and the cycle that skips
jobs that did not change.

The SLURM side (over SSH, through the agent, a watcher killed mid-job) is in
plugins/slurm/tests/test_slurm_push.py.
"""

import shlex
import shutil
import sys
import threading
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor

from runjob_core.monitor import Monitor, observe
from runjob_core.monitor import push as _watch

from runjob_core.monitor import hub as _watchhub
from runjob_core.config import job_from_mapping
from runjob_core.testing import wait_until
from runjob_core.transport import LocalTransport

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from _recorded_queue import queued_context  # noqa: E402


class Collector:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.states: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, value: str) -> None:
        with self.lock:
            (self.paths if kind == _watchhub.PATH else self.states).append(value)


@pytest.mark.parametrize("how", ["inotify", "stat"])
def test_the_watcher_reports_log_growth_and_markers(tmp_path, monkeypatch, how):
    if how == "inotify" and shutil.which("inotifywait") is None:
        pytest.skip("inotifywait is not installed (scripts/test-cluster.sh installs inotify-tools)")
    monkeypatch.setenv("RUNJOB_WATCH", how)
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "job.rj-1.1.out"
    markers = Path(_watch.marker_dir(str(log)))
    transport = LocalTransport()
    hub = _watchhub.Hub(lambda argv: _watchhub.ProcessStream(transport.open_stream(argv)))
    news = Collector()
    sub = hub.subscribe(news)
    try:
        sub.follow([str(log), str(markers)])
        wait_until(lambda: any(s.startswith(f"alive {how}") for s in news.states), what="the watcher to start")
        (logs / "someone-else.out").write_text("not followed\n")
        log.write_text("first line\n")
        wait_until(lambda: str(log) in news.paths, what="log growth")
        # As the job script does: the folder appears whole with its start marker, the end comes later.
        staged = logs / "job.rj-1.1.out.markers.new.1"
        staged.mkdir()
        (staged / "start").write_text("1\n")
        staged.rename(markers)
        wait_until(lambda: str(markers) in news.paths or f"{markers}/start" in news.paths, what="the marker folder")
        (markers / ".end.tmp").write_text("0\n")
        (markers / ".end.tmp").rename(markers / "end")
        wait_until(lambda: f"{markers}/end" in news.paths, what="the end marker")
        assert not any("someone-else" in p for p in news.paths)
    finally:
        sub.close()
    assert hub.watchers == {}  # the last subscriber gone: the watcher process is stopped


def test_news_become_causes_and_only_markers_that_matter_poll():
    class Sub:
        def follow(self, paths): self.followed = paths
        def unfollow(self, paths): self.unfollowed = paths

    watch = _watch.Watch("c", threading.Condition())
    watch._sub = Sub()
    watch.follow("rj-1", "/s/logs/a.out")
    assert watch._sub.followed == ["/s/logs/a.out", "/s/logs/a.out.markers"]
    watch.news(_watchhub.STATE, "alive inotify 4242")
    assert watch.alive and watch.pid == 4242
    # What happened before it was watching is unknown: every followed job gets one look.
    assert watch.pending == {"rj-1": {"resync"}} and _watch.causes_poll(watch.pending["rj-1"])
    # Its marker folder may have been made during inotifywait's scan (then it has no watch):
    # uncertain until one of its markers is heard; a log line does not settle it.
    assert watch.uncertain == {"rj-1"}
    watch.pending.clear()
    watch.news(_watchhub.PATH, "/s/logs/a.out")
    assert watch.uncertain == {"rj-1"}
    for path in ("/s/logs/a.out", "/s/logs/a.out.markers/.end.tmp", "/s/logs/a.out.markers/checkpoint",
                 "/s/logs/other.out", "/s/logs/a.out.markers/end"):
        watch.news(_watchhub.PATH, path)
    assert watch.pending == {"rj-1": {"log", "marker:checkpoint", "marker:end"}}
    assert watch.uncertain == set()
    assert not _watch.causes_poll({"log", "marker:checkpoint"})
    assert _watch.causes_poll({"log", "marker:end"}) and _watch.causes_poll({"confirm"})
    watch.news(_watchhub.STATE, "dead its output ended")
    assert not watch.alive and watch.history == ["alive inotify 4242", "dead its output ended"]


def test_the_job_script_writes_its_markers_beside_the_log(runjob_home, monkeypatch):
    monkeypatch.setenv("RUNJOB_WATCH", "off")  # with a watcher the monitor removes them once the job ended
    context = lifecycle.open_context()
    try:
        job = job_from_mapping({"name": "marked", "command": "echo hi"}, source="marked.yaml", base_dir=str(Path.cwd()))
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        monitor.watch(context, [row.id], min_interval=0.2, max_interval=1.0)
        script = context.store.get_job(row.id).script
    finally:
        context.close()
    markers = Path(_watch.marker_dir(submission.log_path))
    assert f"export RUNJOB_MARKERS={shlex.quote(str(markers))}" in script
    assert sorted(p.name for p in markers.iterdir()) == ["end", "exit", "start"]
    assert (markers / "exit").read_text().strip() == "0" and (markers / "end").read_text().strip() == "0"


def test_a_local_job_is_seen_ending_through_the_watcher(runjob_home):
    context = lifecycle.open_context()
    try:
        job = job_from_mapping({"name": "pushed", "command": "sleep 1; sh -c 'exit 4'"}, source="pushed.yaml",
                               base_dir=str(Path.cwd()))
        row, _ = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        # A 60 s cadence: only the watcher can report this job's end before then.
        monitor.watch(context, [row.id], min_interval=60.0, max_interval=60.0)
        attempt = context.store.latest_attempt(row.id)
        ended = [e for e in context.store.events(row.id, kinds=("state",)) if e.data["state"] == "FAILED"]
    finally:
        context.close()
    assert attempt.state == "FAILED" and attempt.exit_code == 4
    assert len(ended) == 1 and ended[0].data["trigger"] == "watcher"
    causes = set(ended[0].data["causes"])
    # Its end markers; or, had the job ended before the watcher was up, the look every
    # followed job gets when a watcher comes alive.
    assert {"marker:exit", "marker:end"} <= causes or "resync" in causes


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB"


def test_a_cuda_oom_line_is_acted_on_when_the_watcher_reports_it(runjob_home):
    (runjob_home / "oom.txt").write_text(f"Traceback (most recent call last):\n{OOM}\n")
    context = lifecycle.open_context()
    try:
        # Other ranks keep logging after rank 0's traceback: the checker decides on those lines.
        command = "sleep 1; cat oom.txt; for i in $(seq 25); do echo \"[rank1] waiting for rank 0 ($i)\"; done; sleep 120"
        job = job_from_mapping({"name": "oomwake", "command": command}, source="oomwake.yaml", base_dir=str(Path.cwd()))
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        monitor.watch(context, [row.id], min_interval=60.0, max_interval=60.0)
        [finding] = [e for e in context.store.events(row.id, kinds=("finding",)) if e.data["label"] == "cuda_oom"]
        [ended] = [e for e in context.store.events(row.id, kinds=("state",)) if e.data["state"] == "CANCELLED"]
        outcome = context.store.get_job(row.id).outcome
    finally:
        context.close()
    # The log lines woke the monitor (no poll was due for a minute); the stop's outcome came
    # from a re-poll after the stop or the job's end marker, and the spent markers are gone.
    assert finding.data["trigger"] == "watcher" and "log" in finding.data["causes"]
    assert ended.data["trigger"] == "watcher" and {"confirm", "marker:end"} & set(ended.data["causes"])
    assert outcome.startswith("stopped: cuda_oom")
    assert not Path(_watch.marker_dir(submission.log_path)).exists()


def test_unchanged_queued_jobs_cost_no_write_no_observation_no_new_view(tmp_path, monkeypatch):
    context, ids, transport = queued_context(tmp_path, 50)
    observed = []
    real = observe.observe
    monkeypatch.setattr(observe, "observe", lambda *a, **k: observed.append(a[3].job_id) or real(*a, **k))
    # As `watch` cycles: it keeps its observe leases between cycles (a one-shot cycle, as
    # `runjob status` runs, gives them back at its end and takes them again next time).
    cycle = functools.partial(monitor.cycle, keep_leases=True)
    try:
        cycle(context, ids)
        assert len(observed) == 50  # first sight: every job recorded as queued
        first = cycle(context, ids)
        generation = context.store.generation()
        observed.clear()
        again = cycle(context, ids)
        assert observed == [] and context.store.generation() == generation
        assert all(again.views[j] is first.views[j] for j in ids)
        # One job starts: only it is looked at.
        transport.text = transport.text.replace(f"{100007}|{100007}|PENDING|PartitionDown|N/A",
                                                f"{100007}|{100007}|RUNNING|None|1796300330")
        result = cycle(context, ids)
        assert observed == [ids[7]] and result.views[ids[7]].state == "RUNNING" and result.state_changed
    finally:
        context.close()


def test_a_dead_watcher_is_started_again_with_every_followed_job(runjob_home, tmp_path, monkeypatch):
    import os
    import signal

    monkeypatch.setenv("RUNJOB_WATCH_RESTART", "0")
    monkeypatch.setenv("RUNJOB_WATCH", "stat")
    context = lifecycle.open_context()
    try:
        cluster = lifecycle.cluster_for(context, job_from_mapping({"name": "x", "command": "true"}, source="x.yaml"))
        log = tmp_path / "logs" / "x.rj-9.1.out"
        log.parent.mkdir()
        push = Monitor.of(context).push
        assert push.for_cluster(cluster) is None  # a one-off cycle starts no watcher
        push.enable()
        watch = push.for_cluster(cluster)
        watch.follow("rj-9", str(log))
        wait_until(lambda: watch.alive, what="the watcher to start")
        first = watch.pid
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: watch.state.startswith("dead"), what="the watcher's death to be noticed")
        assert push.for_cluster(cluster) is watch  # the same watch, subscribed again
        wait_until(lambda: watch.alive and watch.pid != first, what="a new watcher")
        log.write_text("after the restart\n")
        wait_until(lambda: "log" in watch.pending.get("rj-9", ()), what="news from the new watcher")
    finally:
        Monitor.of(context).push.close()
        context.close()


def test_the_poll_slows_down_only_once_every_followed_jobs_markers_are_heard():
    """A job followed when the watcher came up may have an unwatched marker folder (inotifywait
    -r watches the root last: a folder made during its scan is missed): until one of its
    markers is heard, the full poll keeps the cadence it has without a watcher."""
    class Sub:
        def follow(self, paths): pass
        def unfollow(self, paths): pass

    push = _watch.PushWatch(context=None)
    watch = push.by_cluster["c"] = _watch.Watch("c", push.bell)
    watch._sub = Sub()
    watch.follow("rj-1", "/s/logs/a.out")
    watch.news(_watchhub.STATE, "alive inotify 1")
    assert watch.alive and not push.all_alive()
    assert push.full_poll_interval(10.0, 1.0, 60.0, busy=False) == 15.0  # 1.5x, as without a watcher
    watch.news(_watchhub.PATH, "/s/logs/a.out.markers/checkpoint")
    assert push.all_alive()
    assert push.full_poll_interval(10.0, 1.0, 60.0, busy=True) == 15.0  # the watcher's floor: 60 / 4
    # A job followed once the watcher is up makes its folder under a live watch: certain.
    watch.follow("rj-2", "/s/logs/b.out")
    assert push.all_alive()
