"""Reattach that asks the scheduler's history (issue 19, item 2), on the real cluster.

SLURM drops an ended job from ``squeue`` MinJobAge seconds after it ends (the test
cluster keeps them 600 s so that other tests can look at them). The seam below hides
every job from squeue, as the queue does after MinJobAge; sacct, slurmdbd and the job
are real, so the accounting path is the one that runs in production.
"""

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runjob_core import lifecycle, monitor
from runjob_core.errors import RunjobError
from runjob_core.transport.execute import Completed
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.slurm]
RUNJOB = str(Path(sys.executable).parent / "runjob")


@pytest.fixture
def ctx(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    context = lifecycle.open_context()
    yield context
    context.close()


class Seam:
    """Wraps the cluster's transport: counts sbatch calls; squeue lists nothing (after
    MinJobAge) or fails (slurmctld restarting)."""

    def __init__(self, ctx, monkeypatch, squeue: str) -> None:
        self.transport = ctx.transport(ctx.clusters["under-test"])
        self.real_run = self.transport.run
        self.squeue, self.sbatch = squeue, 0
        monkeypatch.setattr(self.transport, "run", self.run)

    def run(self, argv, **kwargs):
        if "sbatch" in argv:
            self.sbatch += 1
        if "squeue" in argv:
            if self.squeue == "fails":
                return Completed(tuple(argv), 1, "", "slurm_load_jobs error: Unable to contact slurm controller")
            if self.squeue == "forgets":
                return Completed(tuple(argv), 0, "", "")
        return self.real_run(argv, **kwargs)


def killed_while_submitting(ctx, name: str, command: str = "echo hi"):
    """A job whose sbatch went through but whose runjob died before recording it."""
    job = BackendContract().job_spec(name, command)
    row, first = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    ctx.store._db.execute(
        "UPDATE attempts SET state='SUBMITTING', backend_job_id=NULL, submission_json=NULL WHERE job_id=?", (row.id,))
    return job, row, first


def in_accounting(ctx, row, backend_job_id: str) -> bool:
    # A listing by time window, as reattach does: it shows a job seconds after `sacct -j` does
    # (no matter in production, where squeue forgets a job only minutes after it ended).
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 86400))
    argv = ["sacct", "-X", "-n", "-P", "-u", ctx.clusters["under-test"].user, "-S", since, "-o", "JobID"]
    result = ctx.transport(ctx.clusters["under-test"]).run(argv)
    return result.ok and backend_job_id in result.stdout.split()


def test_a_job_squeue_forgot_is_found_in_accounting_not_submitted_again(ctx, monkeypatch):
    job, row, first = killed_while_submitting(ctx, f"forgotten-{secrets.token_hex(3)}")
    wait_until(lambda: in_accounting(ctx, row, first.backend_job_id), timeout=120, what="sacct to record the job")
    seam = Seam(ctx, monkeypatch, squeue="forgets")
    _row, again = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    assert seam.sbatch == 0
    assert again.backend_job_id == first.backend_job_id
    assert [a.backend_job_id for a in ctx.store.attempts(row.id)] == [first.backend_job_id]


def test_a_scheduler_that_cannot_be_asked_is_never_taken_for_no_job(ctx, monkeypatch):
    from runjob_slurm import _backend

    monkeypatch.setattr(_backend, "REATTACH_PAUSE", 0.0, raising=False)
    job, row, first = killed_while_submitting(ctx, f"unasked-{secrets.token_hex(3)}")
    seam = Seam(ctx, monkeypatch, squeue="fails")
    with pytest.raises(RunjobError, match="nothing was submitted"):
        lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    assert seam.sbatch == 0
    assert [a.state for a in ctx.store.attempts(row.id)] == ["SUBMITTING"]
    seam.squeue = "works"  # the scheduler answers again: the same command finds the job
    _row, again = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    assert again.backend_job_id == first.backend_job_id and seam.sbatch == 0


def test_a_finished_job_killed_before_collect_is_collected_not_resubmitted(ctx, runjob_home):
    name = f"uncollected-{secrets.token_hex(3)}"
    command = 'mkdir -p "$RUNJOB_RESULTS"; echo \'{"id": 7}\' > "$RUNJOB_RESULTS/out.jsonl"'
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": name, "cluster": "under-test", "command": command}))
    from runjob_core import config

    job = config.load_job(runjob_home / "job.yaml")
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job), spec_path="job.yaml")
    monitor.watch(ctx, [row.id], min_interval=0.3)  # where a `runjob run` killed before collect leaves it
    assert ctx.store.get_job(row.id).state == "COMPLETED"
    again = subprocess.run([RUNJOB, "run", "job.yaml", "--yes"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    jobs = json.loads(subprocess.run([RUNJOB, "status", "--json"], capture_output=True, text=True).stdout)
    assert [(j["id"], len(j["attempts"])) for j in jobs] == [(row.id, 1)]
    assert json.loads((Path("results") / name / "out.jsonl").read_text()) == {"id": 7}
