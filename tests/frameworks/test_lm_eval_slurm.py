"""lm-evaluation-harness through runjob on the real SLURM cluster, as users write it: the
tier's tiny model, fitted for a few steps, evaluated on two local tasks (lm_eval_tasks/: a
loglikelihood choice task and a generation task, `dataset_path: json` on a local file) with
`--output_path $RUNJOB_RESULTS --log_samples`, offline. runjob reads lm-eval's own files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.reporting import report
from runjob_core.testing import BackendContract

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
TASKS = Path(__file__).parent / "jobs" / "lm_eval_tasks"


@pytest.fixture
def ctx(slurm_context, project):
    shutil.copytree(TASKS, project / TASKS.name)
    return slurm_context


def test_lm_eval_scores_reach_the_report(ctx, frameworks_python):
    command = (f"{frameworks_python} fit_tiny.py model data/train.txt fitted --steps 25 && "
               f"{frameworks_python} -m lm_eval --model hf --model_args pretrained=fitted --tasks tiny_sum,tiny_gen "
               '--include_path lm_eval_tasks --device cpu --batch_size 4 --output_path "$RUNJOB_RESULTS" --log_samples')
    job = BackendContract().job_spec("lm-eval-tiny", command, workdir="project", env=OFFLINE, resources={"time": "15"})
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempt = ctx.store.latest_attempt(row.id)
    assert attempt.state == "COMPLETED", (attempt.state, attempt.exit_code, attempt.reason)
    lifecycle.collect(ctx, ctx.store.get_job(row.id))
    built = report.build_report(ctx.store, ctx.store.get_job(row.id), hook=ctx.pm.hook)
    # lm-eval's own aggregates, per task and metric, as its results_*.json has them
    assert set(built["tasks"]) == {"tiny_sum", "tiny_gen"}
    assert set(built["tasks"]["tiny_sum"]) == {"acc", "acc_stderr"}
    assert set(built["tasks"]["tiny_gen"]) == {"exact_match", "exact_match_stderr"}
    # and its samples, one row per (task, doc), scored by the task's metric
    results = built["results"]
    assert results["rows"] == 40 and results["fields"]["score"] == "score" and results["fields"]["key"] == "id"
    for task, metric in (("tiny_sum", "acc"), ("tiny_gen", "exact_match")):
        assert results["score_by_category"][task]["mean"] == pytest.approx(built["tasks"][task][metric])
    validation = next(a for a in ctx.store.artifacts(row.id) if a.kind == "validation")
    assert validation.rows == 40 and validation.location.endswith("runjob_rows.jsonl")
