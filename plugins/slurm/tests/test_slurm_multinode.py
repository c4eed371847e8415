"""Multi-node training on the real SLURM cluster: partition `multi` spans cpu01 and gpu01
(both slurmd run on this one machine, so "two nodes" share a host, and cpu01/gpu01 resolve
to 127.0.0.1). The job is tests/data/jobs/rendezvous_job.py, run by the nodes' own python3."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm
JOB = Path(__file__).resolve().parents[3] / "tests" / "data" / "jobs" / "rendezvous_job.py"


@pytest.fixture
def ctx(runjob_home, slurm_env):
    partitions = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()
    if "multi" not in partitions:
        # scripts/test-cluster.sh declares it in slurm.conf; a checkout whose script predates it
        # rewrites slurm.conf without it. Create it in slurmctld for this run (gone at the next
        # reconfigure), rather than rewrite the shared config from a test.
        subprocess.run(["scontrol", "create", "PartitionName=multi", "Nodes=cpu01,gpu01", "MaxTime=60",
                        "DefMemPerCPU=500", "State=UP"], check=True)
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    work = runjob_home / "project"
    work.mkdir()
    shutil.copy(JOB, work / "rendezvous_job.py")
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def submit(ctx, name, command, **fields):
    job = BackendContract().job_spec(name, command, workdir="project", template="training",
                                     resources={"partition": "multi", "nodes": 2, "time": "5"}, **fields)
    return lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))


def log_of(ctx, row, n=1):
    transport = ctx.transport(ctx.clusters["under-test"])
    return transport.read_from(ctx.store.attempt(row.id, n).submission.log_path, 0).decode()


def test_two_nodes_run_the_command_once_each_and_meet(ctx):
    row, _ = submit(ctx, "twonodes", "python3 rendezvous_job.py")
    assert "#SBATCH --nodes=2" in ctx.store.get_job(row.id).script
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    log = log_of(ctx, row)
    assert ctx.store.latest_attempt(row.id).state == "COMPLETED", log
    ranks = dict(re.findall(r"^(\d): rank \1 of 2 on (\w+): MASTER=cpu01:(?:\d+)", log, re.M))
    assert ranks == {"0": "cpu01", "1": "gpu01"}, log
    assert "GPUS_PER_NODE=0 WORLD_SIZE=2" in log
    assert re.search(r"^0: rank 0 met ranks \[1\]$", log, re.M) and re.search(r"^1: rank 1 got 'welcome' from rank 0$", log, re.M)
    port = int(re.search(r"MASTER_PORT=(\d+)", log).group(1))
    job_id = int(ctx.store.latest_attempt(row.id).submission.backend_job_id)
    assert port >= 20000 + job_id % 20000  # derived from the job id (moved on only if taken)


def test_usr1_reaches_every_node(ctx):
    row, submission = submit(ctx, "twonodes-usr1", "python3 rendezvous_job.py --wait-usr1", resume={"auto": False})
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and log_of(ctx, row).count("waiting for the warning") == 2,
               timeout=120, interval=0.5, what="both nodes to wait")
    # the time-limit warning as SLURM sends it (--signal=B:USR1): to the batch shell only
    subprocess.run(["scancel", "--batch", "--signal=USR1", submission.backend_job_id], check=True)
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    log = log_of(ctx, row)
    assert "[runjob] USR1: time limit near, asking every node to save" in log
    for rank in (0, 1):
        assert f"{rank}: rank {rank} got USR1: saved, exiting to be resumed" in log, log
    latest = ctx.store.latest_attempt(row.id)
    assert (latest.state, latest.exit_code) == ("FAILED", 75), log


def test_a_node_still_saving_is_not_killed_when_another_asks_to_be_resumed(ctx):
    """Rank 0 exits 75 at once on the warning, rank 1 takes 3 s to save: srun's --kill-on-bad-exit
    must not SIGTERM rank 1 for rank 0's 75 (the job ended 15, rank 1 unsaved, before the fix)."""
    row, submission = submit(ctx, "twonodes-slow", "python3 rendezvous_job.py --wait-usr1 --slow-save 1",
                             resume={"auto": False})
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and log_of(ctx, row).count("waiting for the warning") == 2,
               timeout=120, interval=0.5, what="both nodes to wait")
    subprocess.run(["scancel", "--batch", "--signal=USR1", submission.backend_job_id], check=True)
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    log = log_of(ctx, row)
    for rank in (0, 1):
        assert f"{rank}: rank {rank} got USR1: saved, exiting to be resumed" in log, log
    latest = ctx.store.latest_attempt(row.id)
    assert (latest.state, latest.exit_code) == ("FAILED", 75), log
