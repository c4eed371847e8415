"""torchrun and accelerate launch through runjob on the real SLURM cluster, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.reporting import report
from runjob_core.testing import BackendContract


@pytest.fixture
def ctx(slurm_context):
    return slurm_context


def run(ctx, name, command, **fields):
    job = BackendContract().job_spec(name, command, workdir="project", template="training",
                                     resources={"time": "5", "cpus": 2}, **fields)
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    return ctx.store.get_job(row.id)


def test_torchrun_with_a_failing_rank_reports_that_ranks_exception(ctx, frameworks_python):
    torchrun = Path(frameworks_python).parent / "torchrun"
    row = run(ctx, "torchrun-fail", f"{torchrun} --standalone --nproc_per_node 2 fail_rank.py --fail-rank 1")
    attempts = ctx.store.attempts(row.id)
    # The exception stops the job at once (torchrun would wait for its other rank's timeout),
    # unless torchrun ended first; either way it is not resumed.
    assert len(attempts) == 1 and attempts[0].state in ("CANCELLED", "FAILED"), attempts
    errors = [e.message for e in ctx.store.events(row.id, kinds=("finding",)) if e.data.get("label") == "traceback"]
    assert errors and "ValueError: bad batch at step 10 on rank 1" in errors[0]
    assert not any("closed by peer" in message for message in errors)
    built = report.build_report(ctx.store, row)
    assert "runjob logs" in built["next_step"] and not built["next_step"].startswith("done"), built["next_steps"]


def test_accelerate_launch_starts_two_cpu_processes(ctx, frameworks_python):
    accelerate = Path(frameworks_python).parent / "accelerate"
    # accelerate's --cpu launcher is single-process: --multi_gpu with PartialState(cpu=True)
    # starts N CPU workers (gloo). The port comes from the job id, so jobs sharing the node
    # differ, and stays below Linux's ephemeral ports (32768-60999): a CI run failed once with
    # 20000 + id % 20000, which reaches them, where any outgoing connection may hold it.
    row = run(ctx, "accelerate-2",
              f"{accelerate} launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no "
              "--dynamo_backend no --main_process_port $((20000 + SLURM_JOB_ID % 12000)) accelerate_ranks.py")
    attempt = ctx.store.latest_attempt(row.id)
    transport = ctx.transport(ctx.clusters["under-test"])
    if attempt.state != "COMPLETED":
        log = transport.read_text(attempt.submission.log_path) or ""
        pytest.fail(f"{attempt.state} exit {attempt.exit_code} ({attempt.reason}); the job's log ends:\n{log[-4000:]}")
    rows = [json.loads(line) for line in transport.read_text(attempt.submission.results_dir + "/ranks.jsonl").splitlines()]
    assert sorted(r["rank"] for r in rows) == [0, 1]
    assert all(r["world"] == 2 and r["type"].endswith("MULTI_CPU") and r["all_reduced"] == 2 for r in rows)
