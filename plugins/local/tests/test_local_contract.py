"""The local backend passes the backend contract with real processes."""

import os
import signal

import pytest

from runjob_core.models import ClusterConfig
from runjob_core.testing import BackendContract


class TestLocalContract(BackendContract):
    __test__ = True
    backend = "local"
    time_limit = "3s"
    time_limit_grace = 40.0  # timeout(1) sends KILL 30 s after TERM

    @pytest.fixture
    def cluster(self):
        return ClusterConfig(name="under-test", type="local")

    def lose(self, context, submission):
        # The machine "reboots": the runner and the job die at once, no exit code is written.
        os.killpg(int(submission.extra["pid"]), signal.SIGKILL)

    # Issue 25 part 3: the local plugin keeps no per-attempt state file of its own; a job
    # whose recording was lost is found again from its runner's pid file, even once ended.
    def test_no_state_folder_and_an_ended_job_is_reattached(self, context):
        from runjob_core import lifecycle

        job = self.job_spec("no-files", "echo done")
        row, first = self._submit(context, job)
        ended = self._wait_terminal(context, row.id)
        assert ended.state == "COMPLETED"
        assert not (context.state_dir / "local").exists() or not any((context.state_dir / "local").iterdir())
        context.store._db.execute(
            "UPDATE attempts SET state='SUBMITTING', backend_job_id=NULL, submission_json=NULL WHERE job_id=?", (row.id,)
        )
        _row, again = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        assert again.backend_job_id == first.backend_job_id
        assert again.extra["pid"] == first.extra["pid"] and again.extra["start_time"] == "gone"

    def test_the_pid_file_is_there_when_submit_returns(self, context, monkeypatch):
        """The runner writes its pid file when it runs its first line, which on a loaded machine
        is after submit returned: a kill then lost the job for reattach (CI of stop 39's clean
        clone submitted twice). Submit writes it itself; a runner that is slow to start changes
        nothing. The runner is held before its first line by a stopped bash."""
        import signal as signals

        from runjob_core.transport import detached

        real_run = context.run

        def start_stopped(argv, **kwargs):
            started = real_run(argv, **kwargs)
            if kwargs.get("detach"):
                os.kill(started.pid, signals.SIGSTOP)  # may be before or after its first line
                if detached.process_start_time(started.pid):
                    held.append(started.pid)
            return started

        held: list[int] = []
        monkeypatch.setattr(type(context), "run", staticmethod(start_stopped))
        job = self.job_spec("slow-runner", "echo done")
        row, first = self._submit(context, job)
        try:
            layout_pid = first.extra["exit_file"].rsplit("/", 1)[0] + "/pod-pid.1"
            assert open(layout_pid).read().strip() == first.extra["pid"]
        finally:
            for pid in held:
                os.kill(pid, signals.SIGCONT)
        assert self._wait_terminal(context, row.id).state == "COMPLETED"
