"""GPU telemetry on every backend: the job script's sampler (nothing without nvidia-smi, stopped
with the job), the parser on real H200 lines, the report's figures, and the idle-GPU and
near-full-memory findings through a real monitor, with the stand-in nvidia-smi on PATH."""

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from runjob_core.gpu import telemetry as gpu_telemetry
from runjob_core.gpu import parse_telemetry
from runjob_core.testing import nvidia_smi, run_cli, wait_until

# Real lines from one NVIDIA H200 (bench/device/runs/h200-2026-12-04/telemetry.csv, 2026-12-04), and one
# of a driver that cannot read the power draw.
H200_LINES = """2026/12/04 15:42:20.020, 0, 0, 0, 81.73, 36
2026/12/04 15:42:21.026, 0, 97, 27896, 402.10, 44
2026/12/04 15:42:22.026, 0, 100, 27896, [N/A], 45, 143771
"""


def test_parser_reads_real_lines_and_skips_torn_or_foreign_ones():
    samples, skipped = parse_telemetry(H200_LINES + "2026/12/04 15:42:23.0\nNVIDIA-SMI has failed\n")
    assert [(s.index, s.util, s.memory_used_mib, s.power_w, s.temperature_c) for s in samples] == [
        (0, 0.0, 0.0, 81.73, 36.0), (0, 97.0, 27896.0, 402.1, 44.0), (0, 100.0, 27896.0, None, 45.0)]
    assert samples[2].memory_total_mib == 143771.0 and samples[0].memory_total_mib is None
    assert round(samples[1].ts - samples[0].ts, 3) == 1.006
    assert skipped == 2


def test_usage_mean_peak_and_idle_gpu_hours():
    # GPU 0 busy, then idle for 3 intervals of 10 s; GPU 1 idle throughout (4 intervals).
    points = [(1, "gpu0.util", None, 1000.0 + 10 * i, u) for i, u in enumerate([90, 80, 0, 0, 0])]
    points += [(1, "gpu1.util", None, 1000.0 + 10 * i, 0.0) for i in range(5)]
    points += [(1, "gpu0.mem_mib", None, 1000.0, 30000.0), (1, "gpu0.mem_mib", None, 1010.0, 41000.0)]
    points += [(1, "loss", 5, 1000.0, 2.5)]  # the job's own metrics are not GPU telemetry
    usage = gpu_telemetry.usage(points)
    assert usage["samples"] == 10 and usage["mean_util_percent"] == 17.0 and usage["peak_util_percent"] == 90.0
    assert usage["peak_memory_mib"] == 41000.0
    assert usage["idle_gpu_hours"] == round((20 + 40) / 3600, 4)
    assert [g["idle_gpu_hours"] for g in usage["gpus"]] == [round(20 / 3600, 4), round(40 / 3600, 4)]
    # A gap (the node was down) counts at most twice the usual interval.
    gap = [(1, "gpu0.util", None, t, 0.0) for t in (0.0, 10.0, 20.0, 1020.0)]
    assert gpu_telemetry.usage(gap)["idle_gpu_hours"] == round(40 / 3600, 4)
    assert gpu_telemetry.usage([(1, "loss", 1, 1.0, 2.0)]) is None


def _render(folder: Path, spec: dict) -> str:
    (folder / "r.yaml").write_text(yaml.safe_dump(spec))
    out = run_cli("render", "r.yaml", "--json", cwd=folder)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["script"]


def _sampler_alive(marker: str) -> bool:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return any("nvidia_smi" in line and marker in line for line in ps.splitlines())


@pytest.mark.parametrize("with_smi", [False, True])
def test_the_job_script_samples_its_gpus_and_stops_the_sampler_with_the_job(runjob_home, monkeypatch, with_smi):
    folder = runjob_home.parent / "bin"
    nvidia_smi.install(folder, [nvidia_smi.gpu(0, util=55), nvidia_smi.gpu(1, util=7)])
    path = f"{folder}:/usr/local/bin:/usr/bin:/bin" if with_smi else "/usr/local/bin:/usr/bin:/bin"
    # The job exits by itself with `exit 3` (its EXIT trap stops the sampler too).
    script = _render(runjob_home, {"name": "r", "command": "sleep 2.5; exit 3", "resources": {"gpus": 1},
                                   "health": {"gpu_sample_seconds": 1}, "cluster": "local"})
    assert "--query-gpu=timestamp,index,utilization.gpu,memory.used,power.draw,temperature.gpu,memory.total" in script
    assert "-l 1 " in script and "runjob_gpu_stop" in script
    (runjob_home / "run.sh").write_text(script)
    env = {"PATH": path, "HOME": str(runjob_home), "RUNJOB_GPU_INDICES": "1", "MARK": str(runjob_home)}
    done = subprocess.run(["bash", "run.sh"], cwd=runjob_home, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    telemetry = list(runjob_home.rglob("*.gpu.csv"))
    if not with_smi:
        assert telemetry == []
        return
    samples, skipped = parse_telemetry(telemetry[0].read_text())
    assert samples and skipped == 0 and {s.index for s in samples} == {1} and samples[0].util == 7.0
    time.sleep(1.5)  # a sampler left running would have written again by now
    assert parse_telemetry(telemetry[0].read_text())[0] == samples


def test_cpu_jobs_render_no_sampler(runjob_home):
    script = _render(runjob_home, {"name": "r", "command": "true", "cluster": "local"})
    assert "nvidia-smi --query-gpu" not in script


def _status(cwd, name):
    text = run_cli("status", name, "--json", cwd=cwd).stdout
    return json.loads(text[text.find("\n[") + 1:] if not text.startswith("[") else text)[0]["attempts"][-1]


def test_monitor_reads_telemetry_finds_idle_gpus_and_full_memory_and_the_report_sums_it_up(runjob_home, monkeypatch):
    folder = runjob_home.parent / "bin"
    nvidia_smi.install(folder, [nvidia_smi.gpu(0)])
    monkeypatch.setenv("PATH", f"{folder}:/usr/local/bin:/usr/bin:/bin")
    # A silent running job is looked at every _cyclememo.SWEEP_SECONDS (15 s) when the push path has no
    # news of it: the stall outlasts that, so the idle finding is made while the job still stalls.
    spec = {"name": "stall", "command": "echo loading batch 17; sleep 25; echo done", "resources": {"gpus": 1},
            "health": {"gpu_sample_seconds": 1, "gpu_idle_minutes": 0.05}}
    (runjob_home / "stall.yaml").write_text(yaml.safe_dump(spec))
    assert run_cli("submit", "stall.yaml", "--yes", cwd=runjob_home).returncode == 0
    # The job has its GPU: now it fills the card (98.4% of 143771 MiB) and computes nothing.
    nvidia_smi.configure(folder, [nvidia_smi.gpu(0, util=0, memory_used=141500)])
    wait_until(lambda: _status(runjob_home, "stall").get("gpu_telemetry"), what="the first telemetry in status")
    assert _status(runjob_home, "stall")["gpu_telemetry"]["gpus"][0] == {"index": 0, "util": 0.0, "mem_mib": 141500.0}
    watched = run_cli("watch", "stall", cwd=runjob_home)
    assert watched.returncode == 0, watched.stderr
    events = json.loads(run_cli("events", "stall", "--json", cwd=runjob_home).stdout)
    findings = {e["data"]["label"]: e["message"] for e in events if e["kind"] == "finding"}
    assert "stalled data loader or hung collective? Last log line: loading batch 17" in findings["gpu_idle"]
    assert findings["gpu_idle"].startswith(("gpu_idle: GPU 0 is idle for ", "gpu_idle: GPU 0 was idle for "))
    assert "GPU 0 memory 138.2 of 140.4 GiB used (within 2% of the card)" in findings["gpu_memory_near_full"]
    assert sum(e["kind"] == "finding" and e["data"]["label"] == "gpu_idle" for e in events) == 1  # said once
    report = json.loads(run_cli("report", "stall", "--json", cwd=runjob_home).stdout)
    gpu = report["gpu"]
    assert gpu["mean_util_percent"] == 0.0 and gpu["peak_memory_mib"] == 141500.0 and gpu["samples"] >= 3
    assert 0 < gpu["idle_gpu_hours"] <= report["resources"]["gpu_hours"] + 1e-3
    assert report["estimate"]["gpu_peak_source"] == "nvidia-smi telemetry"
    text = run_cli("report", "stall", cwd=runjob_home).stdout
    assert "utilisation mean 0%, peak 0%; peak memory 138.2 GiB" in text


def test_an_idle_spell_that_ended_before_the_monitor_looked_is_still_reported(runjob_home, monkeypatch):
    # Seen on one H200: the job slept 20 s with its model on the GPU, then trained again; the
    # monitor (woken by the log, or its 15 s sweep) read the idle samples together with the busy
    # ones after them, and only the newest state was checked, so the spell went unreported.
    folder = runjob_home.parent / "bin"
    nvidia_smi.install(folder, [nvidia_smi.gpu(0, util=0)])
    monkeypatch.setenv("PATH", f"{folder}:/usr/local/bin:/usr/bin:/bin")
    spec = {"name": "spell", "command": "echo waiting for data; sleep 9; echo step 2", "resources": {"gpus": 1},
            "health": {"gpu_sample_seconds": 1, "gpu_idle_minutes": 0.05}}
    (runjob_home / "spell.yaml").write_text(yaml.safe_dump(spec))
    assert run_cli("submit", "spell.yaml", "--yes", cwd=runjob_home).returncode == 0
    telemetry = lambda: list(runjob_home.rglob("*.gpu.csv"))  # noqa: E731
    wait_until(lambda: telemetry() and len(parse_telemetry(telemetry()[0].read_text())[0]) >= 5,
               what="5 idle samples")
    nvidia_smi.configure(folder, [nvidia_smi.gpu(0, util=90)])  # busy again before any monitor looked
    wait_until(lambda: parse_telemetry(telemetry()[0].read_text())[0][-1].util == 90.0, what="a busy sample")
    assert run_cli("watch", "spell", cwd=runjob_home).returncode == 0
    events = json.loads(run_cli("events", "spell", "--json", cwd=runjob_home).stdout)
    idle = [e["message"] for e in events if e["kind"] == "finding" and e["data"]["label"] == "gpu_idle"]
    assert len(idle) == 1 and "stalled data loader or hung collective?" in idle[0], idle
    assert "GPU 0 was idle for " in idle[0]


def test_a_negative_sample_interval_is_one_clear_line(runjob_home):
    (runjob_home / "neg.yaml").write_text(yaml.safe_dump({"name": "neg", "command": "true",
                                                            "health": {"gpu_sample_seconds": -3}}))
    result = run_cli("render", "neg.yaml", cwd=runjob_home)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("Error: invalid value -3 at $.health.gpu_sample_seconds in neg.yaml: use a positive "
                                     "number (gpu_sample_seconds: 0 turns GPU telemetry off)")
