"""The opt-in test kit for runjob and its plugins (``pytest_plugins = ["runjob_core.testing"]``).

Fixtures:

* ``runjob_home``: a fresh working directory with its own state store, and no clusters
  file from the user's environment;
* ``runjob_pm``: a fresh plugin manager with the core's defaults only, plus
  ``register(plugin, name)`` that unregisters after the test;
* ``fake_run``: replaces :data:`runjob_core.transport.execute.RUNNER`, records every argv and
  answers from a script (``fake_run.on(["sbatch", ...], stdout="42\\n")``);
* ``runjob_cli``: runs the ``runjob`` CLI in-process and returns click's result;

The SLURM test cluster's fixtures (``slurm_env``, ``slurm_cluster_config``) are the SLURM
plugin's: :mod:`runjob_slurm.testing`.

:class:`BackendContract` is the contract every backend's tests subclass.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pluggy
import pytest

from runjob_core.transport import execute
from runjob_core.models import ACTIVE_STATES, TERMINAL_STATES, ClusterConfig, JobSpec, Submission

_hookimpl = pluggy.HookimplMarker("runjob")


@pytest.fixture
def runjob_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("RUNJOB_HOME", raising=False)
    monkeypatch.delenv("RUNJOB_CLUSTERS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return work


class _PluginRegistry:
    def __init__(self, pm) -> None:
        self.pm = pm
        self._added: list[Any] = []

    def register(self, plugin: Any, name: str) -> None:
        self.pm.register(plugin, name=name)
        self.pm.check_pending()
        self._added.append(plugin)

    def undo(self) -> None:
        for plugin in self._added:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)


@pytest.fixture
def runjob_pm() -> Iterator[Any]:
    from runjob_core.plugins import get_plugin_manager

    pm, _infos = get_plugin_manager(load_entrypoints=False)
    registry = _PluginRegistry(pm)
    pm.register_for_test = registry.register  # type: ignore[attr-defined]
    yield pm
    registry.undo()


class FakeRunner:
    """Records commands and answers them from a script of (argv prefix, result) pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self._script: list[tuple[tuple[str, ...], execute.Completed]] = []
        self.passthrough = False

    def on(self, prefix: Sequence[str], *, stdout: str = "", stderr: str = "", returncode: int = 0) -> None:
        self._script.append((tuple(prefix), execute.Completed(tuple(prefix), returncode, stdout, stderr)))

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> execute.Completed:
        argv = tuple(str(a) for a in argv)
        self.calls.append(argv)
        for prefix, result in self._script:
            if argv[: len(prefix)] == prefix:
                return execute.Completed(argv, result.returncode, result.stdout, result.stderr, result.pid)
        if self.passthrough:
            return execute._spawn(argv, **kwargs)
        raise AssertionError(f"unexpected command: {shlex.join(argv)}")


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    runner = FakeRunner()
    monkeypatch.setattr(execute, "RUNNER", runner)
    return runner


@pytest.fixture
def runjob_cli() -> Callable[..., Any]:
    from click.testing import CliRunner

    from runjob_core.cli import cli

    def invoke(*args: str, input: str | None = None) -> Any:
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
            input: str | None = None) -> Any:
    """Run the installed ``runjob`` command as a user would (a new process), output captured."""
    import subprocess
    import sys

    runjob = str(Path(sys.executable).parent / "runjob")
    return subprocess.run([runjob, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def one_line_error(result: Any) -> str:
    """The one line a failed command printed, asserting it failed without a traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_clusters_yaml(path: Path, clusters: Sequence[ClusterConfig]) -> Path:
    import yaml

    from runjob_core.config import unstructure

    data = {}
    for cluster in clusters:
        entry = {k: v for k, v in unstructure(cluster).items() if k not in ("name", "source") and v not in (None, [], {}, ())}
        # A backend's own keys (cluster.options) sit flat in the entry, beside the core's.
        entry.update({k: v for k, v in (entry.pop("options", None) or {}).items() if v not in (None, [], {}, ())})
        data[cluster.name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"clusters": data}, sort_keys=False))
    return path


def wait_until(predicate: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll *predicate* until it returns something truthy (a deadline for waiting, not a speed limit)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class BackendContract:
    """What every backend must do; subclass it with ``__test__ = True``.

    Subclasses provide the ``cluster`` fixture (a :class:`ClusterConfig` whose ``type`` is
    the backend) and may override :meth:`job_spec`. Tests run real jobs on the backend:
    registration, rendering with quoting, a round trip, exit codes, cancel, a late stop,
    reattach by tag, one poll for many jobs, collect, a whole ``runjob run`` through the
    library gate, a time limit that ends as ``TIMEOUT``, and a lost machine (when the
    subclass implements :meth:`lose`). A backend that passes the kit works with
    ``runjob run``.
    """

    __test__ = False
    backend: str = ""
    #: The shortest time limit the backend enforces (SLURM counts in minutes).
    time_limit: str = "5s"
    #: How long a job may take to end after its time limit (scheduler grace included).
    time_limit_grace: float = 120.0

    def lose(self, context: Any, submission: Submission) -> None:
        """Make the machine running *submission* vanish without a word (kill -9 the runner,
        delete the pod). Backends that cannot do that on purpose leave this alone and the
        lost-machine test is skipped."""
        pytest.skip(f"{self.backend}: the test class does not implement lose()")

    def job_spec(self, name: str, command: str, **fields: Any) -> JobSpec:
        from runjob_core.config import job_from_mapping

        raw = {"name": name, "command": command, "cluster": "under-test", **fields}
        return job_from_mapping(raw, source=f"{name}.yaml", base_dir=str(Path.cwd()))

    @pytest.fixture
    def context(self, runjob_home: Path, cluster: ClusterConfig) -> Iterator[Any]:
        import attrs

        from runjob_core import lifecycle

        write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
        ctx = lifecycle.open_context()
        yield ctx
        ctx.close()

    def _submit(self, context: Any, job: JobSpec) -> tuple[Any, Submission]:
        from runjob_core import lifecycle

        cluster = lifecycle.cluster_for(context, job)
        return lifecycle.submit(context, job, cluster)

    def _wait_terminal(self, context: Any, job_id: str, timeout: float = 120.0) -> Any:
        from runjob_core import monitor

        def done() -> Any:
            monitor.cycle(context, [job_id])
            latest = context.store.latest_attempt(job_id)
            return latest if latest.state in TERMINAL_STATES else None

        return wait_until(done, timeout=timeout, interval=0.5, what=f"job {job_id} to end")

    def _poll_until_terminal(self, context: Any, submission: Submission, timeout: float = 120.0) -> Any:
        """The backend's own word on a job, polled until it is final (no monitor, so no
        health check acts on the job meanwhile)."""
        poll = context.hook("runjob_poll", self.backend)
        cluster = context.clusters[submission.cluster]

        def ended() -> Any:
            status = poll(submissions=[submission], cluster=cluster, context=context)[submission.backend_job_id]
            return status if status.terminal else None

        return wait_until(ended, timeout=timeout, interval=0.3, what=f"{self.backend} job {submission.backend_job_id} to end")

    def test_plugin_registers_and_is_a_backend(self) -> None:
        from runjob_core.plugins import backend_names, get_plugin_manager

        pm, infos = get_plugin_manager()
        assert self.backend in backend_names(pm)
        assert not [i for i in infos if i.name == self.backend and i.error]

    def test_render_has_no_undefined_and_quotes_values(self, context: Any) -> None:
        from runjob_core import lifecycle

        job = self.job_spec("contract-render", "echo hello", env={"GREETING": "a b; touch /tmp/runjob-pwned"})
        rendered = lifecycle.render_preview(context, job, lifecycle.cluster_for(context, job))
        assert rendered.script.startswith("#!/bin/bash")
        assert "export GREETING='a b; touch /tmp/runjob-pwned'" in rendered.script
        assert "echo hello" in rendered.script

    def test_submit_round_trips_and_completes(self, context: Any) -> None:
        from runjob_core.config import record_from_json, record_to_json

        row, submission = self._submit(context, self.job_spec("contract-ok", "echo contract-ok-output"))
        assert submission.backend == self.backend
        assert record_from_json(record_to_json(submission), Submission) == submission
        final = self._wait_terminal(context, row.id)
        assert final.state == "COMPLETED", final
        log = context.transport_for(submission).read_from(submission.log_path, 0)
        assert b"contract-ok-output" in log

    def test_failure_keeps_the_exit_code(self, context: Any) -> None:
        row, _ = self._submit(context, self.job_spec("contract-fail", "exit 3"))
        final = self._wait_terminal(context, row.id)
        assert (final.state, final.exit_code) == ("FAILED", 3)

    def test_cancel(self, context: Any) -> None:
        from runjob_core import lifecycle

        row, _ = self._submit(context, self.job_spec("contract-cancel", "sleep 300"))
        wait_until(lambda: context.store.latest_attempt(row.id).state not in ("SUBMITTING",), what="submission")
        assert lifecycle.cancel(context, context.store.get_job(row.id))
        final = self._wait_terminal(context, row.id)
        assert final.state == "CANCELLED"

    def test_a_stop_after_the_job_ended_keeps_its_own_ending(self, context: Any) -> None:
        # runjob stops a job on a health finding; the job may have ended meanwhile (killed for
        # memory, or just done): the backend must then report that ending, not CANCELLED.
        from runjob_core import lifecycle

        row, submission = self._submit(context, self.job_spec("contract-late-stop", "exit 3"))
        assert self._poll_until_terminal(context, submission, timeout=60).state == "FAILED"
        lifecycle.stop(context, row, reason="stopped by a test")
        time.sleep(1)  # let a cancel that would (wrongly) take effect do so
        after = self._poll_until_terminal(context, submission, timeout=5)
        assert (after.state, after.exit_code) == ("FAILED", 3)
        assert [e.kind for e in context.store.events(row.id, kinds=("stopping",))] == ["stopping"]

    def test_reattach_by_tag_instead_of_submitting_twice(self, context: Any) -> None:
        from runjob_core import lifecycle

        job = self.job_spec("contract-reattach", "sleep 30")
        row, first = self._submit(context, job)
        # Simulate a runjob killed after the backend accepted the job but before the store
        # recorded it: the attempt is back to SUBMITTING with no backend id.
        context.store._db.execute(
            "UPDATE attempts SET state='SUBMITTING', backend_job_id=NULL, submission_json=NULL WHERE job_id=?", (row.id,)
        )
        spy = _HookSpy()
        context.pm.register(spy, name="contract-spy")
        try:
            _row, again = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        finally:
            context.pm.unregister(spy)
        assert again.backend_job_id == first.backend_job_id
        assert spy.submits == 0
        assert len(context.store.attempts(row.id)) == 1
        lifecycle.cancel(context, context.store.get_job(row.id))

    def test_poll_is_one_call_for_many_jobs(self, context: Any) -> None:
        from runjob_core import lifecycle, monitor

        rows = [self._submit(context, self.job_spec(f"contract-batch-{i}", "sleep 20"))[0] for i in range(3)]
        spy = _HookSpy()
        context.pm.register(spy, name="contract-spy")
        try:
            monitor.cycle(context, [r.id for r in rows])
        finally:
            context.pm.unregister(spy)
        assert spy.polls == [3]
        for row in rows:
            assert context.store.latest_attempt(row.id).state in ACTIVE_STATES
            lifecycle.cancel(context, context.store.get_job(row.id))


    def test_collect_brings_the_results_home(self, context: Any) -> None:
        from runjob_core import lifecycle

        job = self.job_spec("contract-collect", _WRITE_THREE_ROWS)
        row, _ = self._submit(context, job)
        assert self._wait_terminal(context, row.id).state == "COMPLETED"
        collected = lifecycle.collect(context, context.store.get_job(row.id))
        assert collected.ok, collected.problems
        rows = (collected.dest / "results.jsonl").read_text().splitlines()
        assert sorted(__import__("json").loads(r)["id"] for r in rows) == [0, 1, 2]
        [results] = [a for a in collected.artifacts if a.kind == "results"]
        assert results.rows == 3 and results.source

    def test_a_whole_run_through_the_library_gate(self, context: Any) -> None:
        # What `runjob run` does: gate (pre-flight included), watch, collect, report.
        from runjob_core import lifecycle, monitor
        from runjob_core.report import build_report

        launched = lifecycle.launch(context, self.job_spec("contract-run", _WRITE_THREE_ROWS))
        info = context.backend_info(self.backend)
        monitor.watch(context, [launched.row.id], min_interval=min(0.5, info.poll_interval), max_interval=info.max_poll_interval)
        row = context.store.get_job(launched.row.id)
        assert row.state == "COMPLETED" and row.outcome == "completed"
        assert lifecycle.collect(context, row).ok
        report = build_report(context.store, context.store.get_job(row.id))
        assert report["job"]["state"] == "COMPLETED" and report["results"]["rows"] == 3

    def test_a_time_limit_ends_as_timeout(self, context: Any) -> None:
        job = self.job_spec("contract-timeout", "sleep 600", resources={"time": self.time_limit}, resume={"auto": False})
        row, _ = self._submit(context, job)
        final = self._wait_terminal(context, row.id, timeout=self.time_limit_grace + 600)
        assert final.state == "TIMEOUT", final

    def test_a_lost_machine_ends_lost_and_is_resumed_only_if_resumable(self, context: Any) -> None:
        from runjob_core import monitor

        row, submission = self._submit(context, self.job_spec("contract-lost", "sleep 120", resume={"max_attempts": 2}))
        def running() -> bool:
            monitor.cycle(context, [row.id])
            return context.store.latest_attempt(row.id).state == "RUNNING"

        wait_until(running, timeout=120, what="the job to run")
        self.lose(context, submission)
        poll = context.hook("runjob_poll", self.backend)
        cluster = context.clusters[submission.cluster]
        status = wait_until(lambda: (lambda s: s if s.terminal else None)(
            poll(submissions=[submission], cluster=cluster, context=context)[submission.backend_job_id]), timeout=120,
            what="the backend to notice")
        assert status.state == "LOST", status
        monitor.cycle(context, [row.id])
        attempts = context.store.attempts(row.id)
        assert attempts[0].state == "LOST"
        assert len(attempts) == (2 if status.resumable else 1)
        from runjob_core import lifecycle

        lifecycle.cancel(context, context.store.get_job(row.id))


#: A job command that writes three result rows where runjob collects them.
_WRITE_THREE_ROWS = (
    'for i in 0 1 2; do printf \'{"id": %d, "response": "r%d", "score": 1.0}\\n\' "$i" "$i"; done'
    ' > "$RUNJOB_RESULTS/results.jsonl"'
)


class _HookSpy:
    """A non-backend plugin wrapping hooks to count calls (it takes part in routed calls)."""

    def __init__(self) -> None:
        self.submits = 0
        self.polls: list[int] = []


    @_hookimpl(wrapper=True)
    def runjob_submit(self, job):
        self.submits += 1
        return (yield)

    @_hookimpl(wrapper=True)
    def runjob_poll(self, submissions):
        self.polls.append(len(submissions))
        return (yield)
