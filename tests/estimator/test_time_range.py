"""How sure the time estimate is (its range), the limit it suggests, and the calibration from the user's
own finished jobs (a real local job prints its rate, collect records it, the next plan with other settings
is scaled by it)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core.config import job_from_mapping
from runjob_core.estimator import time_gate, time_range
from runjob_core.models import Estimate

sys.path.insert(0, str(Path(__file__).parent))
import time_eval  # noqa: E402

RUNJOB = str(Path(sys.executable).parent / "runjob")


def test_range_factors_cover_the_held_out_set():
    """Each kind's factor is the 90th percentile of the held-out errors, to within 0.15: neither a promise the
    model does not keep nor a range wider than it needs. Grows with the set; the model is never fitted to it."""
    rows = time_eval.score(time_eval.load("heldout"))
    for group, factor in time_range.RANGE_FACTOR.items():
        errors = sorted(r["error"] for r in rows if r["group"] == group)
        p90 = errors[math.ceil(0.9 * len(errors)) - 1]
        assert p90 <= factor <= p90 + 0.15, (group, p90, factor)


def _time(total, limit=None, kind="lora", source="first-principles"):
    return {"kind": kind, "tokens_per_s": 1000.0, "total_seconds": total, "limit_seconds": limit,
            "segments": 1 if not limit or total <= limit else math.ceil(total / limit), "source": source,
            "bound": "compute", "assumptions": [], "efficiency": 0.3, "gpu_hours": total / 3600 if total else None, "seconds_per_step": 1.0}


def test_range_and_segments_at_its_high_end():
    t = _time(10 * 3600, limit=3600)
    time_range.apply_range(t)
    assert t["range_seconds"] == pytest.approx([10 * 3600 / 1.7, 17 * 3600]) and t["segments_max"] == 17
    assert t["tokens_per_s_range"] == [588.2, 1700.0]
    measured = _time(3600.0, source="measured")
    time_range.apply_range(measured)
    assert measured["range_seconds"][1] == pytest.approx(3600 * 1.15)
    unknown = _time(None)
    time_range.apply_range(unknown)
    assert unknown["range_seconds"] is None and unknown["tokens_per_s_range"] == [588.2, 1700.0]


def test_the_suggested_limit_is_the_high_end_or_the_partition_maxtime():
    t = _time(3600.0)
    time_range.apply_range(t)
    time_range.suggest_limit(t)
    # 1 h x 1.7 x 1.1 = 6,732 s, rounded up to 5 min
    assert t["suggested_seconds"] == 6900 and "high end" in t["suggested_because"]
    time_range.suggest_limit(t, partition_seconds=4 * 3600)
    assert t["suggested_seconds"] == 6900
    time_range.suggest_limit(t, partition_seconds=3600)
    assert t["suggested_seconds"] == 3600 and "MaxTime" in t["suggested_because"]


LORA = {"name": "lora-8b", "template": "training", "command": "python3 train.py", "model": {"name": "Llama-3.1-8B"},
        "resources": {"gpus": 1, "gpu_type": "h100"}, "checkpoint": {"every": "30m"}}


def _finish(t, **resources):
    job = job_from_mapping({**LORA, "resources": {**LORA["resources"], **resources}}, source="lora.yaml")
    return time_gate.finish(job, [Estimate(source="runjob-core", summary="time: ...", data={"time": t})])[0]


def test_a_limit_that_holds_the_estimate_but_not_its_high_end_is_warned():
    t = _time(3000.0, limit=3600.0)
    judged = _finish(t, time="1:00:00")
    assert "fits the 1:00:00 limit" in judged.summary
    [warning] = judged.data["warnings"]
    assert "not at its high end (1:25:00)" in warning and "ask for resources.time 1:35:00" in warning


def test_a_limit_far_above_the_high_end_is_told_what_would_do():
    t = _time(600.0, limit=24 * 3600.0)
    judged = _finish(t, time="24:00:00")
    assert not judged.data.get("warnings") and "0:20:00 would do" in judged.summary and "backfill" in judged.summary


def test_without_a_limit_the_line_names_the_limit_to_ask_for():
    t = _time(3600.0)
    judged = _finish(t)
    assert "about 60 min (35-102 min)" in judged.summary and "ask for resources.time 1:55:00" in judged.summary


def test_a_job_that_cannot_resume_is_told_the_suggested_limit():
    t = _time(5 * 3600.0, limit=3600.0)
    job = job_from_mapping({**LORA, "resources": {**LORA["resources"], "time": "1:00:00"}, "resume": {"auto": False}},
                           source="lora.yaml")
    [judged] = time_gate.finish(job, [Estimate(source="runjob-core", summary="time: ...", data={"time": t})])
    assert judged.fits is False and any("resources.time >= 9:25:00" in s for s in judged.suggestions)



@pytest.mark.usefixtures("h100_machine")
def test_a_finished_job_calibrates_estimates_with_other_settings(runjob_home):
    """The job prints the HF Trainer's summary; after it ran, a plan with another sequence length (another key:
    no measured rate of its own) is scaled by measured / first-principles of that run."""
    (runjob_home / "train.py").write_text(
        "import json, os, pathlib\n"
        "print({'train_runtime': 12.0, 'train_samples_per_second': 2.0, 'train_steps_per_second': 0.25, 'epoch': 1.0})\n"
        "pathlib.Path(os.environ['RUNJOB_RESULTS'], 'rows.jsonl').write_text(json.dumps({'loss': 1.0}) + '\\n')\n")
    spec = {**LORA, "name": "calib", "command": f"{sys.executable} train.py",
            "params": {"method": "lora", "steps": 100, "micro_batch_size": 2, "seq_len": 2048,
                       "gradient_checkpointing": True}, "resume": {"auto": False}}

    def plan(s):
        (runjob_home / "job.yaml").write_text(yaml.safe_dump(s))
        out = subprocess.run([RUNJOB, "plan", "job.yaml", "--json"], cwd=runjob_home, capture_output=True, text=True)
        [est] = [e for e in json.loads(out.stdout)["estimates"] if "time" in e["data"]]
        return est

    other = {**spec, "params": {**spec["params"], "seq_len": 4096}}
    before = plan(other)["data"]["time"]
    assert before["source"] == "first-principles"
    (runjob_home / "run.yaml").write_text(yaml.safe_dump(spec))
    ran = subprocess.run([RUNJOB, "run", "run.yaml", "--yes", "--force"], cwd=runjob_home, capture_output=True,
                         text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ran_fp = plan(spec)["data"]["time"]["first_principles_tokens_per_s"]
    measured = 2.0 * 2048  # samples/s x seq_len, one GPU
    after = plan(other)
    t = after["data"]["time"]
    assert t["source"] == "calibrated" and t["calibration"] == pytest.approx(measured / ran_fp, rel=1e-3)
    assert t["tokens_per_s"] == pytest.approx(before["tokens_per_s"] * measured / ran_fp, rel=1e-3)
    assert t["range_factor"] == time_range.CALIBRATED_RANGE
    assert "calibrated on this cluster x" in after["summary"]
    assert any("1 earlier run of hf lora on H100-80GB (calib)" in a for a in t["assumptions"])
    qlora = plan({**other, "params": {**other["params"], "method": "qlora"}})["data"]["time"]
    assert qlora["source"] == "first-principles"  # another kind: not calibrated by a LoRA run


def test_more_segments_at_the_high_end_than_max_timeouts_is_warned():
    t = _time(10 * 3600.0, limit=3600.0)  # 10 segments at the estimate, 17 at its high end
    job = job_from_mapping({**LORA, "resources": {**LORA["resources"], "time": "1:00:00"}, "resume": {"max_timeouts": 12}},
                           source="lora.yaml")
    [judged] = time_gate.finish(job, [Estimate(source="runjob-core", summary="time: ...", data={"time": t})])
    assert judged.fits is None and "10 segments" in judged.data["warnings"][0]
    assert "needs 17 segments, more than resume.max_timeouts=12: raise it to 17" in judged.data["warnings"][1]


def test_without_resources_time_a_long_partition_limit_gets_the_shorter_one_that_would_do():
    t = _time(600.0)
    job = job_from_mapping(LORA, source="lora.yaml")
    estimates = [Estimate(source="runjob-core", summary="time: ...", data={"time": t}),
                 Estimate(source="slurm", summary="no resources.time", data={"partition_max_seconds": 2 * 86400})]
    judged = time_gate.finish(job, estimates)[0]
    assert judged.data["time"]["limit_from"] == "partition" and judged.data["time"]["suggested_seconds"] == 1200
    assert "asks for the partition's 48:00:00: resources.time 0:20:00 would do" in judged.summary
    assert not judged.data.get("warnings")
    # the work beyond MaxTime: the suggestion is MaxTime itself, the fewest segments
    long = time_gate.finish(job, [Estimate(source="runjob-core", summary="time: ...", data={"time": _time(10 * 86400.0)}),
                                  estimates[1]])[0]
    assert long.data["time"]["suggested_seconds"] == 2 * 86400 and long.data["time"]["segments"] == 5
