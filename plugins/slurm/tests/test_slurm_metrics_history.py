"""The metrics history of a job on the real SLURM cluster, read over SSH: the history file
the job appends to, read by the monitor from its offset, one point per recorded step."""

import shutil
from pathlib import Path

import attrs
import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import BackendContract, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm
DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "jobs"


@pytest.fixture
def ctx(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [attrs.evolve(slurm_cluster_config(slurm_env), name="under-test")])
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def test_slurm_job_metrics_reach_the_store_and_the_dashboard(ctx, runjob_home):
    from runjob_core.reporting.dashboard import Builder, page_name

    code = runjob_home / "code"  # the workdir synced to the cluster (not the folder holding .runjob/)
    code.mkdir()
    shutil.copy(DATA / "train_job.py", code / "train_job.py")
    job = BackendContract().job_spec("slurm-curve", "python3 train_job.py 6 0.3", resources={"time": "5"},
                                     workdir=str(code))
    row, _submission = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    monitor.watch(ctx, [row.id], min_interval=0.5, max_interval=2.0)
    assert ctx.store.latest_attempt(row.id).state == "COMPLETED", [e.message for e in ctx.store.events(row.id)]
    loss = [(n, step, value) for n, series, step, _ts, value in ctx.store.metrics(row.id) if series == "loss"]
    assert loss == [(1, float(s), round(2.0 / s ** 0.5, 6)) for s in range(1, 7)]
    lifecycle.collect(ctx, ctx.store.get_job(row.id))  # sacct's MaxRSS for the report
    from runjob_core.reporting.report import build_report

    estimate = build_report(ctx.store, ctx.store.get_job(row.id))["estimate"]
    assert estimate["peak_memory_source"] == "sacct MaxRSS" and 0.001 < estimate["peak_memory_gib"] < 1
    Builder(ctx.store, runjob_home / "site").build()
    page = (runjob_home / "site" / page_name(row.id)).read_text()
    assert page.count('class="pt"') == 6 * 2  # loss and reward, one point per step
