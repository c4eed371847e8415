"""The pod's status command reads liveness before the exit file (no false LOST).

The race made certain with a stand-in ``sed`` (the liveness read): while it runs, the job
writes its exit code and its process goes. The old command read the exit file first, saw
neither an exit code nor a live process, and the job was recorded LOST (seen on RunPod under
load, 1 job of 4).
"""

from __future__ import annotations

import os
import subprocess

from runjob_runpod import _ssh


def test_the_status_command_sees_an_exit_code_written_during_the_liveness_read(tmp_path):
    files = _ssh.JobFiles(job_dir=str(tmp_path), script="", log=str(tmp_path / "log"), attempt=1)
    job = subprocess.Popen(["sleep", "60"])
    try:
        with open(files.pid, "w") as handle:
            handle.write(f"{job.pid}\n")
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "sed").write_text(f"#!/bin/bash\necho 0 > {files.exit}\nkill -9 {job.pid}\n")
        (fake / "sed").chmod(0o755)
        env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
        out = subprocess.run(["bash", "-c", _ssh.status_command(files)], env=env, capture_output=True, text=True, check=True)
    finally:
        job.kill()
        job.wait()
    state = _ssh.parse_status(out.stdout)
    assert state.exit_code == 0, out.stdout
