"""HF Trainer through runjob on the real SLURM cluster, as users write it: with
RunjobCallback, and as a plain script that calls nothing of runjob's."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import BackendContract, wait_until

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture
def ctx(slurm_context):
    return slurm_context


def submit(ctx, name, command, **fields):
    job = BackendContract().job_spec(name, command, workdir="project", env=OFFLINE, **fields)
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    return row


def remote_json(ctx, path):
    return json.loads(ctx.transport(ctx.clusters["under-test"]).read_text(path))


def checkpoints(ctx, row):
    transport = ctx.transport(ctx.clusters["under-test"])
    root = ctx.store.latest_attempt(row.id).submission.checkpoint_dir
    return sorted({info.path.split("/", 1)[0] for info in transport.listdir_recursive(root)})


def test_trainer_with_the_callback_saves_on_the_warning_and_ends_at_max_steps(ctx, frameworks_python):
    # SLURM may send the warning up to 60 s before the margin: with a 1-minute limit it comes
    # before a loaded machine has even imported torch (measured: 40-50 s to start here), and
    # every attempt saves after one step. With 3 minutes and a 30 s margin it comes 90-150 s
    # in, at least 30 s before the kill (a 10 s margin with 2 minutes left a loaded CI run too
    # little to finish its step and save: TIMEOUT). The first attempt's 80 steps take 2 s
    # each, 160 s after a 40-50 s start, longer than the limit: the warning always comes
    # first. Later attempts run at full speed and end before any warning.
    row = submit(ctx, "hf-callback",
                 f"{frameworks_python} train_tiny.py model data/train.txt --max-steps 80 --save-steps 50 "
                 "--callback --step-seconds 2.0 --slow-attempts 1",
                 template="training", resources={"time": "3"}, checkpoint={"signal_margin": 30},
                 resume={"max_attempts": 8})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    assert attempts[-1].state == "COMPLETED", [(a.state, a.exit_code, a.reason) for a in attempts]
    # Every attempt before the last saved on the warning (exit 75), none lost its work to SIGTERM.
    assert [(a.state, a.exit_code) for a in attempts[:-1]] == [("FAILED", 75)] * (len(attempts) - 1) and len(attempts) >= 2
    summary = remote_json(ctx, attempts[-1].submission.results_dir + "/summary.json")
    assert summary["global_step"] == 80 and summary["attempt"] == len(attempts)
    assert all(f"checkpoint-{n}" not in checkpoints(ctx, row) for n in range(81, 85))
    resumed = [e.message for e in ctx.store.events(row.id, kinds=("resuming",))]
    assert resumed[0].startswith("Job saved on the time-limit warning at step ") and "checkpoint-" in resumed[0]
    # The callback reported the step and the loss; the monitor read them.
    assert attempts[0].step and 0 < attempts[0].step < 80


def test_a_plain_trainer_script_times_out_and_resumes_from_its_own_checkpoints(ctx, frameworks_python):
    # The first attempt's 160 steps of 0.5 s cannot end before SLURM's kill (60-90 s in);
    # the resumed one runs at full speed.
    row = submit(ctx, "hf-plain",
                 f"{frameworks_python} train_tiny.py model data/train.txt --max-steps 160 --save-steps 20 "
                 "--step-seconds 0.5 --slow-attempts 1",
                 resources={"time": "1"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    assert attempts[0].state == "TIMEOUT" and attempts[-1].state == "COMPLETED", \
        [(a.state, a.exit_code, a.reason, a.step) for a in attempts]
    # No marker, no progress() call: the step came from Trainer's own bar in the log.
    assert attempts[0].step and attempts[0].step > 0
    resumed = ctx.store.events(row.id, kinds=("resuming",))[0].message
    assert "Resuming from checkpoint " in resumed and "/checkpoint-" in resumed
    summary = remote_json(ctx, attempts[-1].submission.results_dir + "/summary.json")
    assert summary["global_step"] == 160
    assert "checkpoint-161" not in checkpoints(ctx, row)


def _trainer_pid(job_id: str) -> int:
    """The pid of this SLURM job's Trainer process: its environment names the job (the test
    cluster's node is this machine), its command line the script."""
    wanted = f"SLURM_JOB_ID={job_id}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"train_tiny.py" in (proc / "cmdline").read_bytes() and wanted in (proc / "environ").read_bytes().split(b"\0"):
                return int(proc.name)
        except OSError:
            continue  # ended meanwhile, or not ours to read
    raise AssertionError(f"no train_tiny.py process of SLURM job {job_id}")


def test_kill_9_mid_training_is_a_kill_and_resumes_to_max_steps(ctx, frameworks_python):
    # kill -9 of the Trainer process (no OOM: sacct FAILED, no oom-kill event): labelled a
    # kill, not host_oom, and resumed automatically from Trainer's newest checkpoint.
    row = submit(ctx, "hf-kill9",
                 f"{frameworks_python} train_tiny.py model data/train.txt --max-steps 60 --save-steps 10 "
                 "--step-seconds 0.5 --slow-attempts 1",
                 resources={"time": "10"})
    wait_until(lambda: monitor.cycle(ctx, [row.id]) is not None and (ctx.store.latest_attempt(row.id).step or 0) >= 25,
               timeout=300, interval=2.0, what="25 steps")
    os.kill(_trainer_pid(ctx.store.latest_attempt(row.id).backend_job_id), signal.SIGKILL)
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    first, last = ctx.store.attempts(row.id)[0], ctx.store.latest_attempt(row.id)
    assert first.state == "FAILED" and first.n == 1
    labels = {e.data.get("label") for e in ctx.store.events(row.id, kinds=("finding",)) if e.attempt == 1}
    assert "killed" in labels and "host_oom" not in labels, labels
    resumed = ctx.store.events(row.id, kinds=("resuming",))
    said = [(e.attempt, e.kind, e.message) for e in ctx.store.events(row.id, kinds=("finding", "resuming", "resume_refused",
                                                                                 "resume_failed", "resume_skipped", "state"))]
    assert resumed and "/checkpoint-" in resumed[0].message, said
    assert last.n == 2 and last.state == "COMPLETED"
    assert remote_json(ctx, last.submission.results_dir + "/summary.json")["global_step"] == 60
