"""A job that ends between the two reads of a status is not recorded LOST.

The race made certain: the moment the runner's liveness is read, the job writes its exit
code and its process goes. Read exit file first, liveness second (the old order), that job
shows neither and was taken as "killed without an exit code" (LOST); read liveness first, the
exit code is found by the read that follows.
"""

from __future__ import annotations

import builtins
import subprocess
import time

from runjob_core.models import Submission
from runjob_local import _runner


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[19]


def test_a_job_ending_between_the_two_reads_is_completed_not_lost(tmp_path, monkeypatch):
    job = subprocess.Popen(["sleep", "60"])
    exit_file, cancel_file = tmp_path / "exit.1", tmp_path / "cancelled.1"
    submission = Submission(
        job_id="rj-race", attempt=1, backend="local", cluster="local", backend_job_id=f"local-{job.pid}", tag="rj-race:1",
        job_dir=str(tmp_path), workdir=str(tmp_path), log_path=str(tmp_path / "log"), results_dir=str(tmp_path),
        checkpoint_dir=str(tmp_path), progress_path=str(tmp_path / "progress.json"), submitted_at=time.time(),
        source="runjob-local",
        extra={"pid": str(job.pid), "start_time": _start_time(job.pid), "exit_file": str(exit_file),
               "cancel_file": str(cancel_file)},
    )
    real_open = builtins.open

    def open_at_the_wrong_moment(path, *args, **kwargs):
        if str(path) == f"/proc/{job.pid}/stat" and not exit_file.exists():
            exit_file.write_text("0\n")  # the job ends now: exit code written, then its process goes
            job.kill()
            job.wait()
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_at_the_wrong_moment)
    try:
        status = _runner.poll([submission])[submission.backend_job_id]
    finally:
        job.kill()
        job.wait()
    assert (status.state, status.exit_code) == ("COMPLETED", 0), status
