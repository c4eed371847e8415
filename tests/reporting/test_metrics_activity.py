"""Metrics from trainer log lines (recorded output of HF Trainer, TRL, verl, OpenRLHF), the
job-side history file, and the activity log under concurrent writers."""

import json
import multiprocessing
import os

from runjob_core.reporting import activity, logmetrics

HF = "{'loss': 0.6931, 'grad_norm': 1.234, 'learning_rate': 4.9e-05, 'epoch': 0.01}"
TRL = ("{'loss': 0.6931, 'grad_norm': 5.1, 'learning_rate': 5e-07, 'rewards/chosen': 0.0, 'rewards/rejected': -0.5, "
       "'rewards/accuracies': 0.25, 'logps/chosen': -120.5, 'epoch': 0.02}")
VERL = ("step:3 - global_seqlen/min:1234.000 - actor/pg_loss:-0.012 - actor/entropy:0.543 - "
        "critic/score/mean:0.25 - timing_s/step:12.3")
OPENRLHF = ("Train step of epoch 0:  10%|\u2588         | 10/100 [00:10<01:30,  1.00it/s, gpt_loss=1.23, "
            "loss_mean=1.2, lr=5e-06]")


def test_trainer_lines_are_parsed():
    text = "\n".join(["loading model", HF, "{'model_name': 'x', 'seed': 1}", TRL, VERL, OPENRLHF,
                      "{'train_runtime': 12.5, 'train_loss': 0.5, 'epoch': 1.0}"])
    found = logmetrics.parse(text)
    assert found[0] == (None, {"loss": 0.6931, "grad_norm": 1.234, "learning_rate": 4.9e-05})
    assert found[1][1]["rewards/rejected"] == -0.5 and "epoch" not in found[1][1]
    assert found[2] == (3, {"global_seqlen/min": 1234.0, "actor/pg_loss": -0.012, "actor/entropy": 0.543,
                            "critic/score/mean": 0.25, "timing_s/step": 12.3})
    assert found[3] == (10, {"gpt_loss": 1.23, "loss_mean": 1.2, "lr": 5e-06})
    # Neither the config dict nor Trainer's end-of-run summary is a curve (issue 30: no one-point charts).
    assert len(found) == 4


def test_tqdm_carriage_returns_give_one_point_each():
    text = "\r".join(OPENRLHF.replace("10/100", f"{i}/100").replace("1.23", str(i)) for i in (1, 2, 3)) + "\n"
    assert [(s, v["gpt_loss"]) for s, v in logmetrics.parse(text)] == [(1, 1.0), (2, 2.0), (3, 3.0)]


def test_progress_appends_the_history_and_keeps_the_progress_file(tmp_path, monkeypatch):
    from runjob_core import job

    monkeypatch.setenv("RUNJOB_PROGRESS", str(tmp_path / "progress.json"))
    monkeypatch.setenv("RUNJOB_ATTEMPT", "2")
    job.progress(step=1, loss=2.0, note="text is not a curve")
    job.progress(step=2, loss=1.5, tokens_per_s=900)
    job.progress(rows_done=5, total=10)  # rows alone: appended (first in this attempt)
    job.progress(rows_done=6, total=10)  # ...but not again within a few seconds
    job.progress(rows_done=10, total=10)  # the last row always
    state = json.loads((tmp_path / "progress.json").read_text())
    assert state["step"] == 2 and state["metrics"] == {"loss": 1.5, "note": "text is not a curve", "tokens_per_s": 900}
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(x["attempt"], x["step"], x["rows_done"], x["m"]) for x in lines] == [
        (2, 1, None, {"loss": 2.0}), (2, 2, None, {"loss": 1.5, "tokens_per_s": 900}), (2, None, 5, {}), (2, None, 10, {})]
    assert state["history_bytes"] == (tmp_path / "metrics.jsonl").stat().st_size


def _writer(args):
    folder, n, writer = args
    for i in range(n):
        activity.append(folder, job=f"job-{writer}", artifact=f"step {i}", rows=i, token_range=(1, 2),
                        score_range=(0.0, 1.0), hub_url="https://hub.example/x", revision="r" * 40)


def test_activity_log_appends_from_many_processes_never_interleave(tmp_path):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_writer, [(tmp_path, 200, w) for w in range(4)])
    lines = activity.read(tmp_path).splitlines()
    assert lines[:4] == activity.HEADER.splitlines()
    rows = lines[4:]
    assert len(rows) == 800 and all(r.startswith("| ") and r.endswith(" |") and r.count(" | ") == 7 for r in rows)
    for w in range(4):
        assert [r.split(" | ")[2] for r in rows if f"| job-{w} |" in r] == [f"step {i}" for i in range(200)]


def test_activity_cells_cannot_break_the_table(tmp_path):
    line = activity.append(tmp_path, job="a|b", artifact="line\nbreak | pipe")
    assert line.count(" | ") == 7 and "\n" not in line[:-1]
    assert os.path.getsize(activity.path_for(tmp_path)) == len(activity.HEADER) + len(line)
