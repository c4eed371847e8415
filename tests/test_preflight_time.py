"""Pre-flight's time estimate (runjob plan / runjob estimate), its verdicts, and the ETA of a running job."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping
from runjob_core.estimator import time_gate
from runjob_core.models import Estimate

RUNJOB = str(Path(sys.executable).parent / "runjob")
DATA = Path(__file__).parent / "data" / "jobs"
TIME_KEYS = {"tokens_per_s", "seconds_per_step", "total_seconds", "segments", "bound", "assumptions", "source"}

# The example: LoRA of a Llama-3.1-8B, 20,000 steps at micro-batch 4 x 4,096 tokens on one
# H100 under a 1-hour limit (with activation checkpointing, so that it fits in memory).
LORA = {"name": "lora-8b", "template": "training", "command": "python3 train.py", "model": {"name": "Llama-3.1-8B"},
        "resources": {"gpus": 1, "gpu_type": "h100", "time": "1:00:00"},
        "params": {"method": "lora", "steps": 20000, "micro_batch_size": 4, "seq_len": 4096, "gradient_checkpointing": True},
        "checkpoint": {"every": "30m"}, "resume": {"max_timeouts": 40}}

# GPU jobs on `cluster: local` need GPUs there (issue 33): a stand-in workstation with 8 H100s.
pytestmark = pytest.mark.usefixtures("h100_machine")


def plan(folder, spec):
    (folder / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    result = subprocess.run([RUNJOB, "plan", f"{spec['name']}.yaml", "--json"], cwd=folder, capture_output=True,
                            text=True, timeout=120)
    return result, json.loads(result.stdout)


def time_estimate(data):
    [est] = [e for e in data["estimates"] if "time" in e["data"]]
    return est


def test_a_job_that_needs_segments_is_warned_with_their_number(runjob_home):
    result, data = plan(runjob_home, LORA)
    est = time_estimate(data)
    t = est["data"]["time"]
    assert TIME_KEYS <= set(t) and t["source"] == "first-principles" and t["bound"] == "compute"
    assert t["segments"] > 10 and t["total_seconds"] > 10 * 3600 and t["limit_seconds"] == 3600
    assert any("20,000 steps x global batch 4 x 4,096 tokens" in a for a in t["assumptions"])
    assert est["summary"].startswith("time: about ") and f"{t['segments']} segments of the 1:00:00 limit" in est["summary"]
    assert "tokens/s per GPU (compute-bound, MFU" in est["summary"]
    assert not data["refused"], data["problems"]
    assert any(f"{t['segments']} segments, each resumed from the last checkpoint" in w for w in data["warnings"])


@pytest.mark.parametrize("change, why", [
    ({"checkpoint": {}}, "without checkpoint.every saves no checkpoint"),
    ({"resume": {"auto": False}}, "resume.auto is off"),
    ({"resume": {"max_timeouts": 3}}, "more segments than resume.max_timeouts=3"),
])
def test_a_job_that_needs_segments_but_cannot_resume_is_refused(runjob_home, change, why):
    result, data = plan(runjob_home, {**LORA, **change})
    assert result.returncode == 1 and data["refused"]
    assert any(why in p and "segments of the 1:00:00 limit" in p for p in data["problems"]), data["problems"]


def test_work_that_fits_and_work_unknown(runjob_home):
    _, data = plan(runjob_home, {**LORA, "params": {**LORA["params"], "steps": 10}})
    assert "fits the 1:00:00 limit" in time_estimate(data)["summary"] and not data["refused"] and not data["warnings"]
    _, data = plan(runjob_home, {**LORA, "params": {k: v for k, v in LORA["params"].items() if k != "steps"}})
    est = time_estimate(data)
    assert est["data"]["time"]["total_seconds"] is None and "amount of work is unknown" in est["summary"]


def test_inference_rows_from_the_input_file(runjob_home):
    (runjob_home / "prompts.jsonl").write_text("".join(json.dumps({"q": i}) + "\n" for i in range(3000)))
    spec = {"name": "gen", "template": "vllm", "command": "python3 gen.py", "data": {"input": "prompts.jsonl"},
            "model": {"name": "Llama-3.1-8B", "max_model_len": 4096, "max_tokens": 1024},
            "resources": {"gpus": 1, "gpu_type": "h100"}, "params": {"input_tokens": 300}}
    _, data = plan(runjob_home, spec)
    t = time_estimate(data)["data"]["time"]
    assert t["bound"] == "memory" and t["segments"] == 1
    assert any("3,000 rows (prompts.jsonl) x 1024 generated tokens (model.max_tokens (an upper bound))" in a
               for a in t["assumptions"])


def test_bad_framework_names_the_key(runjob_home):
    _, data = plan(runjob_home, {**LORA, "params": {**LORA["params"], "framework": "keras"}})
    est = [e for e in data["estimates"] if e["summary"].startswith("no time estimate")]
    assert est and "'keras' at $.params.framework in lora-8b.yaml: use one of" in est[0]["summary"]


def test_bad_transformers_version_names_the_key(runjob_home):
    # YAML reads an unquoted 4.51 as a number
    _, data = plan(runjob_home, {**LORA, "params": {**LORA["params"], "transformers_version": 4.51}})
    est = [e for e in data["estimates"] if e["summary"].startswith("no time estimate")]
    assert est and "4.51 at $.params.transformers_version in lora-8b.yaml: use a version string" in est[0]["summary"]


def test_estimate_command_takes_the_transformers_version(runjob_home, runjob_cli):
    args = ["estimate", "--model", "Qwen3-30B-A3B", "--kind", "inference", "--gpu", "h100", "--engine", "hf",
            "--rows", "10", "--input-tokens", "64", "--output-tokens", "256", "--json"]
    current = json.loads(runjob_cli(*args).output)["time"]
    old = json.loads(runjob_cli(*args, "--transformers-version", "4.51.3").output)["time"]
    assert old["total_seconds"] > 3 * current["total_seconds"]
    assert any("over all 128 experts" in a and "transformers 4.51.3" in a for a in old["assumptions"])


def test_estimate_command_prints_and_carries_the_time(runjob_home, runjob_cli):
    args = ["estimate", "--model", "Llama-3.1-8B", "--kind", "lora", "--gpu", "h100", "--seq-len", "4096", "--batch", "4",
            "--grad-checkpointing", "--steps", "20000", "--time-limit", "1:00:00"]
    text = runjob_cli(*args)
    assert text.exit_code == 0 and "time: about " in text.output and "segments of the 1:00:00 limit" in text.output
    data = json.loads(runjob_cli(*args, "--json").output)
    assert TIME_KEYS <= set(data["time"]) and data["time"]["segments"] > 10
    rate_only = json.loads(runjob_cli("estimate", "--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "h100",
                                      "--engine", "hf", "--json").output)["time"]
    assert rate_only["total_seconds"] is None and rate_only["bound"] == "overhead"
    bad = runjob_cli(*args, "--time-limit", "soon")
    assert bad.exit_code == 2 and "'soon' is not a time" in bad.output


def test_cost_joins_the_backends_price_and_partition_limit():
    job = job_from_mapping({**LORA, "resources": {"gpus": 1, "gpu_type": "h100"}}, source="lora.yaml")
    t = {"kind": "lora", "tokens_per_s": 5000.0, "total_seconds": 36000.0, "segments": 1, "limit_seconds": None,
         "bound": "compute", "source": "first-principles", "assumptions": [], "gpu_hours": 10.0, "efficiency": 0.3}
    estimates = [Estimate(source="runjob-core", summary="time: ...", data={"time": t}),
                 Estimate(source="runpod", summary="price", data={"usd_per_hour": {"NVIDIA H100 80GB HBM3": 2.99}}),
                 Estimate(source="slurm", summary="no resources.time", data={"partition_max_seconds": 7200})]
    joined = time_gate.finish(job, estimates)[0]
    assert joined.data["time"]["usd"] == 29.9 and joined.data["time"]["segments"] == 5
    assert "10.0 GPU-hours ($29.90 on RunPod)" in joined.summary and "5 segments of the 2:00:00 limit" in joined.summary
    assert "(the partition MaxTime)" in joined.data["warnings"][0]


def test_status_watch_and_dashboard_show_the_eta_of_a_running_job(runjob_home, runjob_cli):
    shutil.copy(DATA / "train_job.py", runjob_home / "train_job.py")
    # 60 steps of 0.2 s under a 4 s limit: it will reach the limit long before the end
    raw = {"name": "eta", "command": f"{sys.executable} train_job.py 60 0.2", "resources": {"time": "0:04"},
           "params": {"steps": 60}}
    job = job_from_mapping(raw, source="eta.yaml", base_dir=str(runjob_home))
    context = lifecycle.open_context()
    try:
        row, _ = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        deadline = time.monotonic() + 60
        while (context.store.latest_attempt(row.id).step or 0) < 3 and time.monotonic() < deadline:
            monitor.cycle(context, [row.id])
            time.sleep(0.2)
        from runjob_core.cli._show import live_etas

        etas = live_etas(context.store, monitor.cycle(context, [row.id]))
        assert etas[row.id]["unit"] == "steps" and etas[row.id]["total"] == 60
        [shown] = json.loads(runjob_cli("status", row.id, "--json").output)
        assert shown["eta"]["remaining_seconds"] > 0 and "time limit" in shown["eta"]["warning"]
        # the job's own rate (0.2 s a step), not steps / time since the monitor first saw it running
        assert 0 < shown["eta"]["rate_per_s"] <= 5.5
        text = runjob_cli("status", row.id).output
        assert "eta: " in text and "/60 steps" in text and "reaches its 0:00:04 time limit" in text
        from runjob_core.reporting import dashboard

        dashboard.build(context.store, runjob_home / "dash")
        index = (runjob_home / "dash" / "index.html").read_text()
        assert "ETA " in index and "over the time limit" in index
    finally:
        lifecycle.cancel(context, context.store.get_job(row.id))
        context.close()


@pytest.mark.parametrize("key, value", [("steps", "many"), ("gradient_accumulation_steps", 2.5), ("epochs", -1),
                                        ("precision", "int3")])
def test_bad_work_values_name_their_key_and_nothing_else_breaks(runjob_home, key, value):
    params = {**LORA["params"], key: value}
    if key == "epochs":
        params = {k: v for k, v in params.items() if k != "steps"} | {"rows": 100, "epochs": value}
    result, data = plan(runjob_home, {**LORA, "params": params})
    [est] = [e for e in data["estimates"] if e["summary"].startswith("no time estimate")]
    assert f"at $.params.{key} in lora-8b.yaml" in est["summary"] and "Traceback" not in result.stderr
