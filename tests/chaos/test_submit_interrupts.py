"""Interrupts around submit on the real SLURM cluster (issue 34 item 3): Ctrl-C just after
sbatch answered, kill -9 just before and just after it. The attempt stays SUBMITTING with its
tag; status, watch, resume and cancel then reattach it by that tag or say what to do, and
the scheduler runs the job once."""

import functools
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from runjob_core import lifecycle
from runjob_core.testing import run_cli, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.chaos, pytest.mark.slurm, pytest.mark.slow]
JOB = """mkdir -p "$RUNJOB_RESULTS"; echo '{"id": 1}' > "$RUNJOB_RESULTS/out.jsonl"; sleep 1"""
#: Runs `runjob ARGS` in a process that kills itself with SIGKILL just before or just after
#: the SLURM backend's sbatch (the hook the core calls), as `kill -9` at that instant would.
KILLER = textwrap.dedent("""
    import os, signal, sys
    from runjob_slurm import _backend
    real, when = _backend.submit, sys.argv[1]
    def submit(*args, **kwargs):
        if when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        submission = real(*args, **kwargs)
        print("sbatch:" + submission.backend_job_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    _backend.submit = submit
    from runjob_core.cli import cli
    cli(sys.argv[2:])
""")


@pytest.fixture
def home(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": "interrupted", "cluster": "under-test", "command": JOB}))
    return runjob_home


runjob = functools.partial(run_cli, timeout=300)


def killed(home: Path, when: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", KILLER, when, *args], cwd=home, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout


def the_job(home: Path) -> dict:
    (row,) = json.loads(runjob("status", "--json", "--no-refresh", cwd=home, check=0).stdout)
    return row


def scheduler_jobs(slurm_env, home: Path, job_id: str) -> list[str]:
    """The scheduler's own record: SLURM jobs whose script is in this runjob job's folder."""
    context = lifecycle.open_context()
    try:
        transport = context.transport(context.clusters["under-test"])
        listed = transport.run(["sacct", "-X", "-n", "-P", "-S", "now-1hour", "-o", "JobID,State,SubmitLine%500"]).stdout
    finally:
        context.close()
    return [line.split("|")[0] for line in listed.splitlines() if f"/{job_id}/run." in line]


def scheduler_record(slurm_env, home: Path, job_id: str, expected: int) -> list[str]:
    """:func:`scheduler_jobs` once accounting lists at least *expected* (slurmdbd writes a moment late)."""
    found = []
    wait_until(lambda: len(found.append(scheduler_jobs(slurm_env, home, job_id)) or found[-1]) >= expected, timeout=120)
    return found[-1]


def test_ctrl_c_just_after_sbatch_keeps_the_attempt_and_cancel_stops_that_job(home, slurm_env, monkeypatch):
    from runjob_slurm import _backend

    real, taken = _backend.submit, []
    (home / "job.yaml").write_text(yaml.safe_dump({"name": "interrupted", "cluster": "under-test", "command": "sleep 300"}))

    def interrupted_after(*args, **kwargs):
        taken.append(real(*args, **kwargs).backend_job_id)
        raise KeyboardInterrupt

    monkeypatch.setattr(_backend, "submit", interrupted_after)
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(home / "job.yaml")
        with pytest.raises(KeyboardInterrupt):
            lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
    finally:
        context.close()
    monkeypatch.setattr(_backend, "submit", real)
    row = the_job(home)
    assert row["state"] == "SUBMITTING" and [a["state"] for a in row["attempts"]] == ["SUBMITTING"]
    status = runjob("status", row["id"], "--json", cwd=home, check=0)
    assert f"the backend has it as {taken[0]}" in status.stderr
    assert json.loads(status.stdout)[0]["attempts"][0]["backend_job_id"] == taken[0]
    runjob("cancel", row["id"], cwd=home, check=0)
    assert scheduler_record(slurm_env, home, row["id"], 1) == taken  # one job, and it is the one cancelled
    runjob("watch", row["id"], cwd=home)
    assert the_job(home)["attempts"][0]["state"] == "CANCELLED"


def test_kill_9_just_after_sbatch_then_watch_follows_that_job(home, slurm_env):
    out = killed(home, "after", "submit", "job.yaml", "--yes")
    taken = out.split("sbatch:")[1].strip()
    row = the_job(home)
    assert row["attempts"][0]["state"] == "SUBMITTING"
    watched = runjob("watch", row["id"], cwd=home, check=0)
    assert f"the backend has it as {taken}" in watched.stderr
    assert the_job(home)["attempts"][0]["state"] == "COMPLETED"
    assert scheduler_record(slurm_env, home, row["id"], 1) == [taken]


def test_kill_9_just_before_sbatch_then_status_says_resume_and_resume_submits_once(home, slurm_env):
    killed(home, "before", "submit", "job.yaml", "--yes")
    row = the_job(home)
    status = runjob("status", row["id"], cwd=home, check=0)
    assert "interrupted before the backend took it" in status.stderr and f"runjob resume {row['id']}" in status.stderr
    assert runjob("watch", row["id"], cwd=home).returncode == 1  # nothing to follow: says what to do, does not hang
    runjob("resume", row["id"], "--yes", cwd=home, check=0)
    runjob("watch", row["id"], cwd=home, check=0)
    after = the_job(home)
    assert [a["state"] for a in after["attempts"]] == ["COMPLETED"]
    assert len(scheduler_record(slurm_env, home, row["id"], 1)) == 1


def test_kill_9_of_resume_just_after_sbatch_then_resume_again_reattaches(home, slurm_env):
    killed(home, "before", "submit", "job.yaml", "--yes")
    row = the_job(home)
    out = killed(home, "after", "resume", row["id"], "--yes")
    taken = out.split("sbatch:")[1].strip()
    again = runjob("resume", row["id"], "--yes", cwd=home, check=0)
    assert taken in again.stdout
    runjob("watch", row["id"], cwd=home, check=0)
    assert scheduler_record(slurm_env, home, row["id"], 1) == [taken]


def test_cancel_of_an_attempt_killed_before_sbatch_records_it_cancelled(home, slurm_env):
    killed(home, "before", "submit", "job.yaml", "--yes")
    row = the_job(home)
    runjob("cancel", row["id"], cwd=home, check=0)
    after = the_job(home)
    assert after["state"] == "CANCELLED" and after["attempts"][0]["state"] == "CANCELLED"
    assert scheduler_jobs(slurm_env, home, row["id"]) == []
