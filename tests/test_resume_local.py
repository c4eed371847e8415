"""Checkpoint and resume on the local backend, with real processes and real time limits."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping

JOB_SCRIPT = Path(__file__).parent / "data" / "jobs" / "rows_job.py"


@pytest.fixture
def ctx(runjob_home):
    shutil.copy(JOB_SCRIPT, runjob_home / "rows_job.py")
    context = lifecycle.open_context()
    yield context
    context.close()


def run_to_end(ctx, raw):
    job = job_from_mapping(raw, source=f"{raw['name']}.yaml", base_dir=str(Path.cwd()))
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    monitor.watch(ctx, [row.id], min_interval=0.2, max_interval=1.0)
    return ctx.store.get_job(row.id)


def rows_of(ctx, row):
    submission = ctx.store.latest_attempt(row.id).submission
    lines = Path(submission.results_dir, "rows.jsonl").read_text().splitlines()
    return [json.loads(line)["id"] for line in lines]


def test_time_limit_is_resumed_until_every_row_is_written_once(ctx):
    # 3 s per attempt: a loaded 2-core machine can spend 2 s starting Python (an attempt
    # without progress would end the loop, and the test would measure the load, not resume).
    row = run_to_end(ctx, {"name": "steady", "command": f"{sys.executable} rows_job.py 500 0.01",
                           "resources": {"time": "0:03"}})
    attempts = ctx.store.attempts(row.id)
    ids = rows_of(ctx, row)
    assert sorted(ids) == list(range(500)) and len(ids) == 500
    assert attempts[-1].state == "COMPLETED" and 2 <= len(attempts) <= 5
    assert [a.state for a in attempts[:-1]] == ["TIMEOUT"] * (len(attempts) - 1)
    assert all(b.rows_done > a.rows_done for a, b in zip(attempts, attempts[1:]))
    messages = [e.message for e in ctx.store.events(row.id, kinds=("resuming",))]
    assert messages and "timed out after" in messages[0] and "Resuming from" in messages[0]


def test_no_progress_stops_after_two_attempts(ctx):
    row = run_to_end(ctx, {"name": "stuck", "command": "sleep 30", "resources": {"time": "0:01"}})
    attempts = ctx.store.attempts(row.id)
    assert [a.state for a in attempts] == ["TIMEOUT", "TIMEOUT"]
    assert "no progress" in row.outcome


def test_torn_line_from_a_kill_is_repaired_on_resume(ctx, runjob_cli):
    from runjob_core import resume

    # resume.auto off: the manual path (the automatic one: the test below)
    row = run_to_end(ctx, {"name": "torn", "command": f"{sys.executable} rows_job.py 40 0 --torn-after 25",
                           "resume": {"auto": False}})
    first = ctx.store.latest_attempt(row.id)
    assert first.state == "FAILED" and first.exit_code == 137
    plan, _ = resume.plan(ctx, row)
    resume.resubmit(ctx, row, plan)
    monitor.watch(ctx, [row.id], min_interval=0.2, max_interval=1.0)
    ids = rows_of(ctx, ctx.store.get_job(row.id))
    assert sorted(ids) == list(range(40)) and 99999 not in ids
    log = Path(ctx.store.latest_attempt(row.id).submission.log_path).read_text()
    assert "already done: 25, repaired bytes: 40" in log


def test_kill_9_without_an_oom_record_is_a_kill_and_resumes_by_itself(ctx):
    # Before: labelled host_oom ("request more host memory") and its 'stop' refused the resume.
    row = run_to_end(ctx, {"name": "kill9", "command": f"{sys.executable} rows_job.py 40 0 --torn-after 25"})
    attempts = ctx.store.attempts(row.id)
    assert [(a.state, a.exit_code) for a in attempts] == [("FAILED", 137), ("COMPLETED", 0)]
    labels = {e.data.get("label") for e in ctx.store.events(row.id, kinds=("finding",))}
    assert "killed" in labels and "host_oom" not in labels
    resuming = [e.message for e in ctx.store.events(row.id, kinds=("resuming",))]
    assert resuming and "(killed)" in resuming[0]
    ids = rows_of(ctx, ctx.store.get_job(row.id))
    assert sorted(ids) == list(range(40))


def test_checkpoint_without_marker_is_skipped_for_the_previous_one(ctx):
    from runjob_core import resume

    row = run_to_end(ctx, {"name": "ckpt", "command": f"{sys.executable} rows_job.py 160 0.005 --checkpoints",
                           "resources": {"time": "0:20"}, "resume": {"auto": False}})
    submission = ctx.store.latest_attempt(row.id).submission
    folder = Path(submission.checkpoint_dir)
    assert sorted(p.name for p in folder.iterdir()) == ["step-100", "step-150", "step-50"]
    # Cut step-150 as a kill mid-save would: its files are there, its marker is not.
    (folder / "step-150" / ".runjob_complete").unlink()
    (folder / "step-100" / "state.json").write_text('{"rows": 1')  # and truncate step-100's file
    ctx.store.update_attempt(row.id, 1, state="TIMEOUT")
    plan, _ = resume.plan(ctx, ctx.store.get_job(row.id))
    assert plan.checkpoint == str(folder / "step-50") and plan.step == 50


def test_manual_resume_refuses_a_completed_job(ctx):
    from runjob_core import resume
    from runjob_core.errors import RunjobError

    row = run_to_end(ctx, {"name": "done", "command": "true"})
    with pytest.raises(RunjobError, match="completed"):
        resume.plan(ctx, row)


def test_resume_keeps_the_spec_hash(ctx):
    row = run_to_end(ctx, {"name": "hash", "command": f"{sys.executable} rows_job.py 120 0.01",
                           "resources": {"time": "0:01"}, "params": {"lr": 0.1}})
    assert len(ctx.store.attempts(row.id)) >= 2
    from runjob_core.config import spec_hash

    assert spec_hash(ctx.store.get_job(row.id).spec) == row.spec_hash


SAVE_AND_EXIT = """\
import os, sys
from runjob_core.job import progress, RESUME_EXIT_CODE
attempt = int(os.environ["RUNJOB_ATTEMPT"])
progress(step=10 * attempt)
sys.exit(0 if attempt >= int(sys.argv[1]) else RESUME_EXIT_CODE)
"""


def test_an_exit_75_save_is_reported_as_a_save_not_a_timeout(ctx, runjob_home):
    (runjob_home / "save.py").write_text(SAVE_AND_EXIT)
    row = run_to_end(ctx, {"name": "saver", "command": f"{sys.executable} save.py 2"})
    assert [a.state for a in ctx.store.attempts(row.id)] == ["FAILED", "COMPLETED"]
    message = ctx.store.events(row.id, kinds=("resuming",))[0].message
    assert message.startswith("Job saved on the time-limit warning at step 10.") and "timed out" not in message


def test_a_refusal_names_max_attempts_when_that_ran_out(ctx, runjob_home):
    (runjob_home / "save.py").write_text(SAVE_AND_EXIT)
    row = run_to_end(ctx, {"name": "saver", "command": f"{sys.executable} save.py 9",
                           "resume": {"max_attempts": 2, "max_timeouts": 5}})
    assert len(ctx.store.attempts(row.id)) == 2
    assert "resume.max_attempts=2" in row.outcome and "max_timeouts" not in row.outcome


def _trainer_folder(root: Path, step: int, state_text: str | None = None) -> Path:
    """A checkpoint-N folder laid out as transformers.Trainer writes it (weights, optimizer, state)."""
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    (folder / "optimizer.pt").write_bytes(b"x" * 64)
    if state_text is None:
        state_text = json.dumps({"global_step": step, "max_steps": 100, "log_history": []})
    (folder / "trainer_state.json").write_text(state_text)
    return folder


def test_trainer_checkpoint_folders_count_without_the_marker(ctx):
    from runjob_core import resume

    row = run_to_end(ctx, {"name": "plain-trainer", "command": "true", "resume": {"auto": False}})
    root = Path(ctx.store.latest_attempt(row.id).submission.checkpoint_dir)
    _trainer_folder(root, 20)
    _trainer_folder(root, 40)
    _trainer_folder(root, 60, state_text='{"global_step": 60, "log_hi')  # killed while writing its last file
    (root / "checkpoint-80").mkdir()  # killed before Trainer wrote its state at all
    (root / "checkpoint-80" / "model.safetensors").write_bytes(b"\0" * 16)
    ctx.store.update_attempt(row.id, 1, state="TIMEOUT")
    ctx.store.set_job(row.id, outcome=None)
    plan, _ = resume.plan(ctx, ctx.store.get_job(row.id))
    assert (plan.checkpoint, plan.step) == (str(root / "checkpoint-40"), 40)


TRAIN_AND_SAVE = """\
import json, os, sys
from pathlib import Path
from runjob_core.job import checkpoint_saved, exit_to_resume, progress
total = json.load(open(os.environ["RUNJOB_PARAMS"]))["max_steps"]
start = int(os.environ.get("RUNJOB_RESUME_STEP") or 0)
first = os.environ["RUNJOB_ATTEMPT"] == "1"
for step in range(start + 1, total + 1):
    progress(step=step, loss=10.0 / step)
    if step % 20 == 0:
        folder = Path(os.environ["RUNJOB_CHECKPOINT_DIR"]) / f"step-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "state.json").write_text(json.dumps({"step": step}))
        checkpoint_saved(folder, step=step)
    if first and step == 30:
        exit_to_resume()  # 10 steps past the checkpoint at 20: redone by the next attempt
"""


def test_the_report_has_a_training_section(ctx, runjob_home):
    from runjob_core.reporting import render, report

    (runjob_home / "train.py").write_text(TRAIN_AND_SAVE)
    row = run_to_end(ctx, {"name": "trainer", "template": "training", "command": f"{sys.executable} train.py",
                           "params": {"max_steps": 50}})
    assert [a.state for a in ctx.store.attempts(row.id)] == ["FAILED", "COMPLETED"]
    built = report.build_report(ctx.store, row)
    assert built["training"] == {"steps_done": 50, "steps_total": 50, "final_loss": 0.2, "steps_lost_per_resume": [10]}
    assert ("training", "step 50 of 50, final loss 0.2, steps redone per resume: 10") in render.statistics_rows(built)


def test_a_launcher_that_turns_a_save_into_exit_1_still_reports_75(ctx, runjob_home):
    # torchrun exits 1 when its workers exit 75; exit_to_resume() left $RUNJOB_STOP_FILE.saved.
    (runjob_home / "save.py").write_text(SAVE_AND_EXIT.replace("sys.exit(0 if", "from runjob_core.job import exit_to_resume\n"
                                                                "exit_to_resume() if attempt < int(sys.argv[1]) else sys.exit(0)\nsys.exit(0 if"))
    row = run_to_end(ctx, {"name": "launched", "template": "training",
                           "command": f"{sys.executable} save.py 2 || exit 1"})
    attempts = ctx.store.attempts(row.id)
    assert [(a.state, a.exit_code) for a in attempts] == [("FAILED", 75), ("COMPLETED", 0)]
    log = Path(attempts[0].submission.log_path).read_text()
    assert "the job saved on the time-limit warning (exit 1): exit 75, resume me" in log


def test_a_refusal_for_no_progress_names_checkpoint_folders_runjob_cannot_use(ctx):
    # A job saving its own way into checkpoint-N folders, without trainer_state.json or the
    # marker: before, the refusal said only "no progress", as if it had saved nothing.
    save = 'mkdir -p "$RUNJOB_CHECKPOINT_DIR/checkpoint-10" && echo weights > "$RUNJOB_CHECKPOINT_DIR/checkpoint-10/model.bin"'
    row = run_to_end(ctx, {"name": "unmarked", "command": f"{save}; sleep 30", "resources": {"time": "0:01"}})
    assert [a.state for a in ctx.store.attempts(row.id)] == ["TIMEOUT", "TIMEOUT"]
    assert "no progress" in row.outcome
    assert "checkpoint folders without trainer_state.json or runjob's .runjob_complete marker" in row.outcome
    assert "checkpoint-10" in row.outcome
    refusal = [e.message for e in ctx.store.events(row.id, kinds=("resume_refused",))]
    assert refusal and "checkpoint-10" in refusal[0]
