"""The backend contract: what a backend must do for ``runjob run`` to work with it.

Subclass :class:`BackendContract` with ``__test__ = True`` in your plugin's tests. The kit
runs real jobs on your backend, the way the CLI does:

* from a working folder whose path has a space and a quote (``my proj's work``);
* across processes: a job submitted here is followed, cancelled and collected by the
  ``runjob`` command in new processes (state kept in your process is state lost);
* cancel is checked in the backend's world: the job beats a heartbeat file, which must stop;
* collect is compared file by file on a nested tree;
* submit of a long job must return within :attr:`BackendContract.submit_seconds`;
* short jobs polled alone and continuously must never end LOST or FAILED.

A failure names the contract rule that broke (``contract rule 'cancel-stops-the-job'
broken: ...``). The kit's own tests (``tests/test_kit_catches.py``) run it against the
backends of :mod:`runjob_core.testing.broken`, each broken on purpose, and each fails it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runjob_core.errors import RunjobError, TransportError
from runjob_core.models import ACTIVE_STATES, TERMINAL_STATES, ClusterConfig, JobSpec, Submission
from runjob_core.testing._helpers import run_cli, wait_until, write_clusters_yaml
from runjob_core.testing._rules import _HEARTBEAT, _WRITE_NESTED, NESTED_FILES, ContractBroken, _HookSpy, _tail, rule

__all__ = ["BackendContract", "ContractBroken", "NESTED_FILES", "rule"]

#: The kit's working folder: a space and a quote, as users' folders have.
WORK_FOLDER = "my proj's work"


class BackendContract:
    """What every backend must do; subclass it with ``__test__ = True``.

    Subclasses provide the ``cluster`` fixture (a :class:`ClusterConfig` whose ``type`` is
    the backend) and may override :meth:`job_spec`. The backend must be installed (its
    entry point found by a new ``runjob`` process). A backend that passes the kit works with
    ``runjob run``: the kit's rules are what ``runjob run`` and the other commands rely on.
    """

    __test__ = False
    backend: str = ""
    #: The shortest time limit the backend enforces (SLURM counts in minutes).
    time_limit: str = "5s"
    #: How long a job may take to end after its time limit (scheduler grace included).
    time_limit_grace: float = 120.0
    #: How long submitting a long job may take (``runjob run`` says "submitted" after it).
    submit_seconds: float = 30.0
    #: Short jobs polled alone, continuously, for the no-false-endings rule.
    short_jobs: int = 4
    #: How long ``runjob cancel`` waits for the backend to confirm a job ended.
    cancel_wait: float = 60.0

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
    def context(self, runjob_home: Path, cluster: ClusterConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
        import attrs

        from runjob_core import lifecycle

        work = runjob_home / WORK_FOLDER
        work.mkdir()
        monkeypatch.chdir(work)
        write_clusters_yaml(work / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
        ctx = lifecycle.open_context()
        yield ctx
        self._cancel_leftovers(ctx)
        ctx.close()

    def _cancel_leftovers(self, context: Any) -> None:
        from runjob_core import lifecycle

        for attempt in context.store.active_attempts():
            try:
                lifecycle.cancel(context, context.store.get_job(attempt.job_id), wait=30, force=True)
            except RunjobError as exc:  # cleanup must reach every job; the test's own result stands
                print(f"kit cleanup: could not cancel {attempt.job_id}: {exc}")

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

    def _poll_until_terminal(self, context: Any, submission: Submission, timeout: float = 120.0,
                             interval: float = 0.3) -> Any:
        """The backend's own word on a job, polled until it is final (no monitor, so no
        health check acts on the job meanwhile)."""
        poll = context.hook("runjob_poll", self.backend)
        cluster = context.clusters[submission.cluster]

        def ended() -> Any:
            status = poll(submissions=[submission], cluster=cluster, context=context)[submission.backend_job_id]
            return status if status.terminal else None

        return wait_until(ended, timeout=timeout, interval=interval, what=f"{self.backend} job {submission.backend_job_id} to end")

    # ------------------------------------------------------------------ registration, rendering

    def test_plugin_registers_and_is_a_backend(self) -> None:
        from runjob_core.plugins import backend_names, get_plugin_manager

        pm, infos = get_plugin_manager()
        rule("installed", self.backend in backend_names(pm), f"no installed backend named {self.backend!r} (entry point "
             "group 'runjob'); the CLI processes the kit starts could not load it")
        assert not [i for i in infos if i.name == self.backend and i.error]

    def test_render_has_no_undefined_and_quotes_values(self, context: Any) -> None:
        from runjob_core import lifecycle

        job = self.job_spec("contract-render", "echo hello", env={"GREETING": "a b; touch /tmp/runjob-pwned"})
        rendered = lifecycle.render_preview(context, job, lifecycle.cluster_for(context, job))
        assert rendered.script.startswith("#!/bin/bash")
        rule("values-quoted", "export GREETING='a b; touch /tmp/runjob-pwned'" in rendered.script,
             "an env value reached the script unquoted")
        assert "echo hello" in rendered.script

    # ------------------------------------------------------------------ endings

    def test_submit_round_trips_and_completes(self, context: Any) -> None:
        from runjob_core.config import record_from_json, record_to_json

        row, submission = self._submit(context, self.job_spec("contract-ok", "echo contract-ok-output"))
        assert submission.backend == self.backend
        rule("submission-json", record_from_json(record_to_json(submission), Submission) == submission,
             "the Submission does not survive the state store (put your data in extra, JSON-safe)")
        final = self._wait_terminal(context, row.id)
        rule("round-trip", final.state == "COMPLETED", f"a job running `echo` ended {final.state} ({final.reason})")
        log = context.transport_for(submission).read_from(submission.log_path, 0)
        rule("log", b"contract-ok-output" in log, f"the job's output is not in its log at {submission.log_path}")

    def test_paths_with_spaces_and_quotes(self, context: Any) -> None:
        row, submission = self._submit(context, self.job_spec("contract-paths", 'echo "ran in $PWD"'))
        final = self._wait_terminal(context, row.id)
        rule("paths-with-spaces", final.state == "COMPLETED", f"a job started from {Path.cwd()} (a space and a quote in "
             f"the path) ended {final.state} ({final.reason}, exit code {final.exit_code}): quote every path your backend "
             "puts in a shell line (shlex.quote)")
        log = context.transport_for(submission).read_from(submission.log_path, 0)
        rule("paths-with-spaces", b"ran in " in log, f"the job's output is not in its log at {submission.log_path}")

    def test_failure_keeps_the_exit_code(self, context: Any) -> None:
        row, _ = self._submit(context, self.job_spec("contract-fail", "exit 3"))
        final = self._wait_terminal(context, row.id)
        rule("exit-code", (final.state, final.exit_code) == ("FAILED", 3), f"`exit 3` ended {final.state} with exit code "
             f"{final.exit_code}")

    def test_short_jobs_never_end_lost(self, context: Any) -> None:
        # Each job is polled alone and continuously: a backend that reads the exit file before
        # the runner's liveness sees, sooner or later, a job end between the two reads.
        for i in range(self.short_jobs):
            _row, submission = self._submit(context, self.job_spec(f"contract-short-{i}", f"sleep 0.{3 + 2 * i}"))
            status = self._poll_until_terminal(context, submission, timeout=120, interval=0.0)
            rule("no-false-endings", status.state == "COMPLETED", f"a job running `sleep` was reported {status.state} "
                 f"({status.reason}): read whether the runner is alive FIRST and the exit-code file second "
                 "(runjob_core.transport.detached does)")

    def test_a_time_limit_ends_as_timeout(self, context: Any) -> None:
        job = self.job_spec("contract-timeout", "sleep 600", resources={"time": self.time_limit}, resume={"auto": False})
        row, _ = self._submit(context, job)
        final = self._wait_terminal(context, row.id, timeout=self.time_limit_grace + 600)
        rule("time-limit", final.state == "TIMEOUT", f"a job past resources.time ended {final.state}")

    # ------------------------------------------------------------------ across processes

    def test_submit_returns_within_seconds(self, context: Any) -> None:
        from runjob_core import lifecycle

        job = self.job_spec("contract-submit-returns", "sleep 60")
        finished: list[Any] = []

        def submit() -> None:
            own = lifecycle.open_context()  # a store connection of this thread's own
            try:
                finished.append(self._submit(own, job))
            finally:
                own.close()

        thread = threading.Thread(target=submit, daemon=True)
        thread.start()
        thread.join(self.submit_seconds)
        rule("submit-returns", not thread.is_alive(), f"submitting a 60 s job did not return within {self.submit_seconds:.0f} s: "
             "runjob_submit must start the job and return (a non-detached context.run waits for the process's output to "
             "close; start it with detach=True)")

    def test_steps_run_in_separate_processes(self, context: Any) -> None:
        row, _ = self._submit(context, self.job_spec("contract-processes", _WRITE_NESTED))
        watched = run_cli("watch", row.id, cwd=Path.cwd(), timeout=600)
        state = context.store.get_job(row.id)
        rule("separate-processes", state.state == "COMPLETED", f"submitted in one process, followed by `runjob watch` in "
             f"another: the job is {state.state} ({state.outcome}); watch said: {_tail(watched.stderr)}. Keep what you "
             "need about a job in Submission.extra, not in your process")
        collected = run_cli("collect", row.id, cwd=Path.cwd(), timeout=600)
        rule("separate-processes", collected.returncode == 0, f"`runjob collect` in a new process failed: {_tail(collected.stderr)}")

    def test_resume_runs_in_a_new_process(self, context: Any) -> None:
        job = self.job_spec("contract-resume", '[ "$RUNJOB_ATTEMPT" = 1 ] && sleep 600; echo "attempt $RUNJOB_ATTEMPT done"',
                            resources={"time": self.time_limit}, resume={"auto": False})
        row, _ = self._submit(context, job)
        first = self._wait_terminal(context, row.id, timeout=self.time_limit_grace + 600)
        rule("time-limit", first.state == "TIMEOUT", f"a job past resources.time ended {first.state}")
        resumed = run_cli("resume", row.id, "--yes", cwd=Path.cwd(), timeout=600)
        rule("separate-processes", resumed.returncode == 0, f"`runjob resume` in a new process failed: {_tail(resumed.stderr)}")
        final = self._wait_terminal(context, row.id, timeout=600)
        rule("separate-processes", (final.n, final.state) == (2, "COMPLETED"), f"the attempt `runjob resume` submitted from "
             f"a new process is attempt {final.n}, {final.state} ({final.reason})")

    def test_cancel_stops_the_job_in_the_backends_world(self, context: Any) -> None:
        row, submission = self._submit(context, self.job_spec("contract-cancel", _HEARTBEAT))
        beat = f"{submission.results_dir}/heartbeat"
        wait_until(lambda: self._read(context, submission, beat), timeout=300, what="the job to start beating")
        cancelled = run_cli("cancel", row.id, "--wait", str(self.cancel_wait), cwd=Path.cwd(),
                            timeout=self.cancel_wait + 240)
        after = context.store.latest_attempt(row.id)
        rule("cancel-stops-the-job", cancelled.returncode == 0 and after.state == "CANCELLED",
             f"`runjob cancel` (a new process) was not confirmed: the attempt is {after.state}; it said: "
             f"{_tail(cancelled.stderr)}. runjob_cancel must stop the job, and runjob_poll report CANCELLED only once it "
             "has ended")
        first = self._read(context, submission, beat)
        time.sleep(2.0)
        second = self._read(context, submission, beat)
        rule("cancel-stops-the-job", first == second, f"the job still runs after its cancel was confirmed (its heartbeat "
             f"went from {first} to {second}): the poll said CANCELLED but nothing stopped the process")

    def _read(self, context: Any, submission: Submission, path: str) -> str | None:
        try:
            return context.transport_for(submission).read_text(path)
        except TransportError:
            return "machine gone"  # a terminated machine runs nothing: the job is stopped

    def test_a_cancel_after_the_job_ended_keeps_its_own_ending(self, context: Any) -> None:
        from runjob_core import lifecycle

        row, submission = self._submit(context, self.job_spec("contract-late-cancel", "true"))
        assert self._poll_until_terminal(context, submission, timeout=120).state == "COMPLETED"
        lifecycle.cancel(context, context.store.get_job(row.id), wait=60)
        final = context.store.latest_attempt(row.id)
        rule("late-cancel", final.state == "COMPLETED", f"a job that had completed before `runjob cancel` was recorded "
             f"{final.state}: the scheduler's end state must win")

    def test_a_stop_after_the_job_ended_keeps_its_own_ending(self, context: Any) -> None:
        # runjob stops a job on a health finding; the job may have ended meanwhile (killed for
        # memory, or just done): the backend must then report that ending, not CANCELLED.
        from runjob_core import lifecycle

        row, submission = self._submit(context, self.job_spec("contract-late-stop", "exit 3"))
        assert self._poll_until_terminal(context, submission, timeout=60).state == "FAILED"
        lifecycle.stop(context, row, reason="stopped by a test")
        time.sleep(1)  # let a cancel that would (wrongly) take effect do so
        after = self._poll_until_terminal(context, submission, timeout=5)
        rule("late-stop", (after.state, after.exit_code) == ("FAILED", 3), f"a job that failed before the stop now "
             f"reads {after.state} / {after.exit_code}")
        assert [e.kind for e in context.store.events(row.id, kinds=("stopping",))] == ["stopping"]

    # ------------------------------------------------------------------ reattach, batching, collect

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
        rule("reattach", again.backend_job_id == first.backend_job_id and spy.submits == 0,
             "a job stuck in SUBMITTING was submitted again instead of found by its tag (runjob_reattach)")
        assert len(context.store.attempts(row.id)) == 1

    def test_poll_is_one_call_for_many_jobs(self, context: Any) -> None:
        from runjob_core import monitor

        rows = [self._submit(context, self.job_spec(f"contract-batch-{i}", "sleep 20"))[0] for i in range(3)]
        spy = _HookSpy()
        context.pm.register(spy, name="contract-spy")
        try:
            monitor.cycle(context, [r.id for r in rows])
        finally:
            context.pm.unregister(spy)
        rule("batched-poll", spy.polls == [3], f"one cycle over 3 jobs made runjob_poll calls of sizes {spy.polls}")
        for row in rows:
            assert context.store.latest_attempt(row.id).state in ACTIVE_STATES

    def test_collect_is_complete_file_by_file(self, context: Any) -> None:
        from runjob_core import collecting

        row, _ = self._submit(context, self.job_spec("contract-collect", _WRITE_NESTED))
        rule("round-trip", self._wait_terminal(context, row.id).state == "COMPLETED", "the results-writing job did not complete")
        collected = run_cli("collect", row.id, cwd=Path.cwd(), timeout=600)
        rule("collect-is-complete", collected.returncode == 0, f"`runjob collect` failed: {_tail(collected.stderr)}")
        dest = collecting.results_folder(context.store.get_job(row.id))
        for name, content in NESTED_FILES.items():
            path = dest / name
            rule("collect-is-complete", path.is_file(), f"{name} (written by the job under $RUNJOB_RESULTS) is missing "
                 f"from {dest}: collect every file of the results folder, subfolders included")
            rule("collect-is-complete", path.read_text() == content, f"{name} arrived changed in {dest}")
        rows = [json.loads(line)["id"] for line in (dest / "results.jsonl").read_text().splitlines()]
        assert sorted(rows) == [0, 1, 2]

    def test_a_whole_run_through_the_library_gate(self, context: Any) -> None:
        # What `runjob run` does: gate (pre-flight included), watch, collect, report.
        from runjob_core import lifecycle, monitor
        from runjob_core.reporting.report import build_report

        launched = lifecycle.launch(context, self.job_spec("contract-run", _WRITE_NESTED))
        info = context.backend_info(self.backend)
        monitor.watch(context, [launched.row.id], min_interval=min(0.5, info.poll_interval), max_interval=info.max_poll_interval)
        row = context.store.get_job(launched.row.id)
        rule("a-whole-run", row.state == "COMPLETED" and row.outcome == "completed", f"ended {row.state}: {row.outcome}")
        assert lifecycle.collect(context, row).ok
        report = build_report(context.store, context.store.get_job(row.id))
        assert report["job"]["state"] == "COMPLETED" and report["results"]["rows"] == 3

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
        rule("lost-machine", status.state == "LOST", f"a vanished machine was reported {status.state}")
        monitor.cycle(context, [row.id])
        attempts = context.store.attempts(row.id)
        assert attempts[0].state == "LOST"
        assert len(attempts) == (2 if status.resumable else 1)
