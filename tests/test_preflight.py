"""Pre-flight through the CLI: memory estimates and benchmark references refuse or warn
before anything is submitted."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

RUNJOB = str(Path(sys.executable).parent / "runjob")

# GPU jobs on `cluster: local` need GPUs there (issue 33): a stand-in workstation with 8 H100s.
pytestmark = pytest.mark.usefixtures("h100_machine")


def runjob(*args, cwd):
    return subprocess.run([RUNJOB, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def write(folder, name, spec):
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


BIG = {"name": "big", "template": "vllm", "command": "python3 generate.py", "benchmark": "gsm8k",
       "model": {"name": "meta-llama/Llama-3.1-70B-Instruct", "max_model_len": 8192, "max_tokens": 2048},
       "resources": {"gpus": 1, "gpu_type": "a100-40gb"}, "params": {"num_fewshot": 8}}


def test_plan_refuses_a_model_that_does_not_fit_with_suggestions(runjob_home):
    write(runjob_home, "big", BIG)
    result = runjob("plan", "big.yaml", "--json", cwd=runjob_home)
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["refused"]
    # the memory estimate (the local backend also refuses: the stand-in workstation has no A100)
    [estimate] = [e for e in data["estimates"] if e["fits"] is not None and e["source"] != "runjob-local"]
    assert estimate["fits"] is False and any("tp=4" in s for s in estimate["suggestions"])
    assert data["review"]["max_tokens"] == "2048" and data["review"]["GPUs"].startswith("1 x a100-40gb")


def test_submit_refuses_without_force_and_records_nothing(runjob_home):
    write(runjob_home, "big", BIG)
    result = runjob("submit", "big.yaml", "--yes", cwd=runjob_home)
    assert result.returncode == 1 and "pre-flight refused the job" in result.stderr and "--force" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(runjob("status", "--json", cwd=runjob_home).stdout) == []


def test_a_model_that_fits_passes(runjob_home):
    small = {**BIG, "name": "small", "model": {"name": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 8192, "max_tokens": 2048},
             "resources": {"gpus": 1, "gpu_type": "h100"}}
    write(runjob_home, "small", small)
    data = json.loads(runjob("plan", "small.yaml", "--json", cwd=runjob_home).stdout)
    assert not data["refused"] and data["estimates"][0]["fits"] is True


def test_reference_rules_warn_and_missing_reference_warns(runjob_home):
    spec = {**BIG, "name": "shots", "model": {"name": "Qwen/Qwen2.5-7B-Instruct", "max_tokens": 2048},
            "resources": {"gpus": 1, "gpu_type": "h100"}, "params": {"num_fewshot": 3}}
    write(runjob_home, "shots", spec)
    data = json.loads(runjob("plan", "shots.yaml", "--json", cwd=runjob_home).stdout)
    assert any("num_fewshot" in w for w in data["warnings"])
    write(runjob_home, "unknown", {**spec, "name": "unknown", "benchmark": "my-private-bench"})
    data = json.loads(runjob("plan", "unknown.yaml", "--json", cwd=runjob_home).stdout)
    assert any("no benchmark reference" in w and "runjob reference new" in w for w in data["warnings"])


def test_time_estimate_from_earlier_runs_says_how_many_segments(runjob_home):
    import shutil as sh

    sh.copy(Path(__file__).parent / "data" / "jobs" / "rows_job.py", runjob_home / "rows_job.py")
    spec = {"name": "timed", "command": f"{sys.executable} rows_job.py 40 0.05", "params": {"num_samples": 40}}
    write(runjob_home, "timed", spec)
    assert runjob("run", "timed.yaml", "--yes", cwd=runjob_home).returncode == 0
    longer = {**spec, "params": {"num_samples": 4000}, "resources": {"time": "1"}, "resume": {"auto": False}}
    write(runjob_home, "timed", longer)
    data = json.loads(runjob("plan", "timed.yaml", "--json", cwd=runjob_home).stdout)
    [estimate] = [e for e in data["estimates"] if "rows/s" in e["summary"]]
    assert "4000 rows" in estimate["summary"] and "1 earlier attempt of 'timed'" in estimate["summary"]
    assert estimate["fits"] is False and data["refused"]
    assert estimate["data"]["segments"] >= 2
