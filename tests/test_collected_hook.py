"""``runjob_collected``: called once per final collect, on a third-party plugin registered
beside the core's own reporting (which is a plugin of the same hook); a plugin's bug or
refusal is recorded and the others still run; the dashboard sync rebuilds only what changed."""

from __future__ import annotations

from pathlib import Path

from runjob_core import hookimpl, lifecycle, monitor, plugins
from runjob_core.errors import BackendError
from runjob_core.models import ARTIFACT_RESULTS


class Notifier:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[dict] = []
        self.fail = fail

    @hookimpl
    def runjob_collected(self, job, submission, artifacts, problems, dest, cluster):
        self.calls.append({"job": job.name, "attempt": submission.attempt, "kinds": [a.kind for a in artifacts],
                           "problems": tuple(problems), "dest": dest, "cluster": cluster.name,
                           "files": sorted(p.name for p in dest.iterdir())})
        if self.fail is not None:
            raise self.fail


def _context(plugin: Notifier):
    pm, _ = plugins.get_plugin_manager()
    pm.register(plugin, name="notifier")
    return lifecycle.open_context(pm=pm)


def _finished(context, name: str, command: str):
    from runjob_core.config import job_from_mapping

    job = job_from_mapping({"name": name, "command": command}, source=f"{name}.yaml", base_dir=str(Path.cwd()))
    row = lifecycle.launch(context, job).row
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    return context.store.get_job(row.id)


WRITES = 'printf \'{"id": 1}\\n{"id": 2}\\n\' > "$RUNJOB_RESULTS/results.jsonl"'


def test_a_third_party_plugin_is_called_once_per_collect_with_the_artifacts(runjob_home):
    notifier = Notifier()
    context = _context(notifier)
    row = _finished(context, "told", WRITES)
    collected = lifecycle.collect(context, row)
    assert collected.ok, collected.problems
    [call] = notifier.calls
    assert call["job"] == "told" and call["attempt"] == 1 and call["cluster"] == "local" and call["problems"] == ()
    assert ARTIFACT_RESULTS in call["kinds"] and call["dest"] == collected.dest and "results.jsonl" in call["files"]
    # The core's reporting is a plugin of the same hook: its summary event and the dashboard sync ran once.
    assert len(context.store.events(row.id, kinds=("results",))) == 1
    assert len(context.store.events(row.id, kinds=("dashboard_synced",))) == 1
    assert context.store.events(row.id, kinds=("results",))[0].data["rows"] == 2
    # Collected already and untouched: nothing new came, nobody is told again.
    lifecycle.collect(context, context.store.get_job(row.id))
    assert len(notifier.calls) == 1
    context.close()


def test_a_failed_collect_is_announced_with_its_problems(runjob_home):
    notifier = Notifier()
    context = _context(notifier)
    row = _finished(context, "empty", "true")
    collected = lifecycle.collect(context, row)
    assert not collected.ok
    [call] = notifier.calls
    assert call["problems"] == collected.problems and ARTIFACT_RESULTS not in call["kinds"]
    assert not context.store.events(row.id, kinds=("results",))  # no results: no summary event
    context.close()


def test_a_plugin_bug_or_refusal_is_recorded_and_reporting_still_runs(runjob_home):
    for fail, kind in ((ValueError("boom"), "plugin_error"), (BackendError("the chat server said no"), "after_collect_failed")):
        notifier = Notifier(fail=fail)
        context = _context(notifier)
        row = _finished(context, f"told-{kind}".replace("_", "-"), WRITES)
        collected = lifecycle.collect(context, row)
        assert collected.ok, collected.problems  # the collect stands
        [event] = context.store.events(row.id, kinds=(kind,))
        assert "notifier" in event.message and str(fail) in event.message
        if kind == "plugin_error":
            assert event.data["hook"] == "runjob_collected"
        assert context.store.events(row.id, kinds=("dashboard_synced",))  # the core's reporting ran after it
        context.close()


def test_the_dashboard_sync_rebuilds_the_collected_job_not_the_running_ones(runjob_home):
    from runjob_core.reporting.dashboard import Builder

    context = _context(Notifier())
    running = lifecycle.launch(context, _spec("still-running", "sleep 30")).row
    row = _finished(context, "done", WRITES)
    out = context.state_dir / "dashboard"
    first = Builder(context.store, out).build()
    assert first["rebuilt"] == 2  # a running job is rebuilt by every full build
    context.store.add_event(row.id, "note", "a change after the build")
    synced = Builder(context.store, out).sync_job(row.id)
    assert synced["rebuilt"] == 1 and synced["jobs"] == 2
    assert "a change after the build" in (out / f"job-{row.id}.html").read_text()
    assert "still-running" in (out / "index.html").read_text()  # kept from the last build
    lifecycle.cancel(context, context.store.get_job(running.id))
    context.close()


def _spec(name: str, command: str):
    from runjob_core.config import job_from_mapping

    return job_from_mapping({"name": name, "command": command}, source=f"{name}.yaml", base_dir=str(Path.cwd()))
