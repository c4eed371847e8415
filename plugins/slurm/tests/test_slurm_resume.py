"""Checkpoint and resume on the real SLURM cluster: time limits, the USR1 warning, requeue.

The job is tests/data/jobs/rows_job.py, uploaded with the workdir and run by the node's own
python3, which has no runjob installed: it imports runjob_core.job from the files runjob ships.
"""

import json
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm
JOB_SCRIPT = Path(__file__).resolve().parents[3] / "tests" / "data" / "jobs" / "rows_job.py"


@pytest.fixture
def ctx(runjob_home, slurm_env):
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    work = runjob_home / "project"
    work.mkdir()
    shutil.copy(JOB_SCRIPT, work / "rows_job.py")
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def submit(ctx, name, command, **fields):
    job = BackendContract().job_spec(name, command, workdir="project", **fields)
    row, submission = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    return row, submission


def rows_of(ctx, row):
    transport = ctx.transport(ctx.clusters["under-test"])
    submission = ctx.store.latest_attempt(row.id).submission
    text = transport.read_from(submission.results_dir + "/rows.jsonl", 0).decode()
    return [json.loads(line)["id"] for line in text.splitlines()]


def log_of(ctx, row, n):
    transport = ctx.transport(ctx.clusters["under-test"])
    return transport.read_from(ctx.store.attempt(row.id, n).submission.log_path, 0).decode()


def test_time_limit_then_auto_resume_until_done(ctx):
    row, _ = submit(ctx, "steady300", "python3 rows_job.py 300 0.35", resources={"time": "1"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    ids = rows_of(ctx, row)
    assert len(ids) == 300 and sorted(ids) == list(range(300))
    assert attempts[0].state == "TIMEOUT" and attempts[-1].state == "COMPLETED" and len(attempts) <= 3
    assert "DUE TO TIME LIMIT" in log_of(ctx, row, 1)
    assert "already done: 0" not in log_of(ctx, row, 2)


def test_usr1_warning_saves_before_the_limit(ctx):
    row, _ = submit(ctx, "usr1", "python3 rows_job.py 300 0.1", template="training",
                    resources={"time": "1"}, checkpoint={"signal_margin": 50})
    assert "#SBATCH --signal=B:USR1@50" in ctx.store.get_job(row.id).script
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    first = log_of(ctx, row, 1)
    assert "saved, exiting to be resumed" in first and "DUE TO TIME LIMIT" not in first
    assert (attempts[0].state, attempts[0].exit_code) == ("FAILED", 75)
    assert attempts[-1].state == "COMPLETED" and sorted(rows_of(ctx, row)) == list(range(300))


def test_requeue_by_the_scheduler_continues_in_the_same_attempt(ctx):
    row, submission = submit(ctx, "requeued", "python3 rows_job.py 80 0.2")
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and (ctx.store.latest_attempt(row.id).rows_done or 0) >= 10,
               timeout=60, interval=0.5, what="some rows")
    subprocess.run(["scontrol", "requeue", submission.backend_job_id], check=True)
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    assert len(attempts) == 1 and attempts[0].state == "COMPLETED"
    assert sorted(rows_of(ctx, row)) == list(range(80))
    states = [e.data.get("state") for e in ctx.store.events(row.id, kinds=("state",))]
    assert "RUNNING" in states and states.index("RUNNING") < len(states) - 1
    log = log_of(ctx, row, 1)
    assert log.count("[runjob] start") == 2 and "already done: 0" in log


def test_no_progress_is_stopped_after_two_attempts(ctx):
    row, _ = submit(ctx, "noprogress", "sleep 300", resources={"time": "1"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    assert [a.state for a in attempts] == ["TIMEOUT", "TIMEOUT"]
    assert "no progress" in ctx.store.get_job(row.id).outcome


def test_signal_margin_defaults_from_the_measured_save_time(ctx):
    from runjob_slurm._render import signal_margin

    row, submission = submit(ctx, "margin", "true", template="training")
    assert "#SBATCH --signal=B:USR1@300" in ctx.store.get_job(row.id).script
    transport = ctx.transport(ctx.clusters["under-test"])
    transport.put_text(submission.progress_path, json.dumps({"step": 5, "metrics": {"max_save_seconds": 40}}))
    job = ctx.store.get_job(row.id).spec
    attempt = lifecycle.new_attempt(ctx, job, ctx.clusters["under-test"], job_id=row.id, n=2)
    assert signal_margin(job, attempt, ctx.clusters["under-test"], ctx) == 180


def test_torn_line_is_repaired_on_resume_on_slurm(ctx):
    from runjob_core import resume

    row, _ = submit(ctx, "torn", "python3 rows_job.py 40 0 --torn-after 25")
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    first = ctx.store.attempts(row.id)[0]
    assert first.state == "FAILED"  # SIGKILL: exit code 0:9 (signal 9)
    if ctx.store.latest_attempt(row.id).n == 1:
        # a SIGKILL without an OOM record is `killed`, retried by itself (issue 30); resume by hand otherwise
        plan, _ = resume.plan(ctx, ctx.store.get_job(row.id))
        resume.resubmit(ctx, ctx.store.get_job(row.id), plan)
        monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    assert ctx.store.latest_attempt(row.id).n == 2
    ids = rows_of(ctx, row)
    assert sorted(ids) == list(range(40)) and 99999 not in ids
    assert "already done: 25, repaired bytes: 40" in log_of(ctx, row, 2)


def test_checkpoint_without_marker_is_skipped_on_slurm(ctx):
    from runjob_core import resume

    row, submission = submit(ctx, "ckpt", "python3 rows_job.py 110 0 --checkpoints", resume={"auto": False})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    transport = ctx.transport(ctx.clusters["under-test"])
    folder = submission.checkpoint_dir
    transport.run(["rm", f"{folder}/step-100/.runjob_complete"])
    ctx.store.update_attempt(row.id, 1, state="TIMEOUT")
    plan, _ = resume.plan(ctx, ctx.store.get_job(row.id))
    assert (plan.checkpoint, plan.step) == (f"{folder}/step-50", 50)
