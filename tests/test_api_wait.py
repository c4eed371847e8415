"""``Session.wait`` drives the invocation's Monitor as ``runjob watch`` does: one loop, woken
by the push path (issue 25 item 1), its leases and watchers given back when it returns."""

from __future__ import annotations

import attrs

from runjob_core import api
from runjob_core.context import RunContext
from runjob_core.monitor import Monitor


def test_wait_is_woken_by_the_push_path_and_gives_everything_back(runjob_home, monkeypatch):
    # A 60 s poll cadence: only the watcher can report this job's end before then.
    real = RunContext.backend_info
    monkeypatch.setattr(RunContext, "backend_info",
                        lambda self, backend: attrs.evolve(real(self, backend), poll_interval=60.0, max_poll_interval=60.0))
    job = api.job_from_dict({"name": "pushed-api", "command": "sleep 1; sh -c 'exit 4'", "resume": {"auto": False}},
                            base_dir=runjob_home)
    seen: list[list[api.JobState]] = []
    with api.open() as rj:
        ref = rj.submit(job)
        [state] = rj.wait([ref], on_cycle=seen.append)
        context = rj._context
        ended = [e for e in context.store.events(ref.id, kinds=("state",)) if e.data["state"] == "FAILED"]
        monitor = Monitor.of(context)
        leases = context.store.held_leases("observe:")
        watches, enabled = monitor.push.watches(), monitor.push.enabled
    assert state.state == "FAILED" and state.exit_code == 4
    assert len(ended) == 1 and ended[0].data["trigger"] == "watcher"
    # Its end markers; or, had the job ended before the watcher was up, the look every followed
    # job gets when a watcher comes alive.
    assert {"marker:exit", "marker:end"} <= set(ended[0].data["causes"]) or "resync" in ended[0].data["causes"]
    assert seen and seen[-1][0].state == "FAILED" and all(len(states) == 1 for states in seen)
    assert leases == [] and watches == [] and not enabled


def test_wait_on_nothing_returns_at_once_without_following_other_jobs(runjob_home):
    job = api.job_from_dict({"name": "other", "command": "sleep 60"}, base_dir=runjob_home)
    with api.open() as rj:
        ref = rj.submit(job)
        try:
            assert rj.wait([]) == []
            assert rj.status(ref).state in ("PENDING", "RUNNING", "SUBMITTING")
        finally:
            rj.cancel(ref)
