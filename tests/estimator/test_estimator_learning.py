"""The learning loop on the local backend: a real job prints its GPU peak, collect records it,
and the next ``runjob estimate`` of the same model and settings says what was measured."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

RUNJOB = str(Path(sys.executable).parent / "runjob")

# a GPU job on `cluster: local` needs GPUs there (issue 33): the stand-in workstation with 8 H100s
pytestmark = pytest.mark.usefixtures("h100_machine")


def runjob(*args, cwd):
    return subprocess.run([RUNJOB, *args], cwd=cwd, capture_output=True, text=True)


def test_a_local_jobs_printed_peak_corrects_the_next_estimate(runjob_home):
    # the job prints its peak the way a training script does (torch.cuda.max_memory_allocated)
    (runjob_home / "train.py").write_text(
        "import json, os, pathlib\n"
        "print('peak: torch.cuda.max_memory_allocated() = 21.5 GiB')\n"
        "pathlib.Path(os.environ['RUNJOB_RESULTS'], 'rows.jsonl').write_text(json.dumps({'loss': 1.0}) + '\\n')\n")
    command = f"{sys.executable} train.py"
    spec = {"name": "lora-peak", "template": "training", "command": command,
            "model": {"name": "Llama-3.1-8B"}, "resources": {"gpus": 1, "gpu_type": "h100"},
            "resume": {"auto": False},
            "params": {"method": "lora", "seq_len": 4096, "micro_batch_size": 2, "gradient_checkpointing": True}}
    (runjob_home / "peak.yaml").write_text(yaml.safe_dump(spec))
    ran = runjob("run", "peak.yaml", "--yes", "--force", cwd=runjob_home)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    same = ("estimate", "--model", "Llama-3.1-8B", "--kind", "lora", "--gpu", "h100", "--seq-len", "4096",
            "--batch", "2", "--grad-checkpointing")
    shown = runjob(*same, cwd=runjob_home)
    assert shown.returncode == 0, shown.stderr
    assert "measured on this cluster: 21.5 GiB GPU peak (torch.cuda.max_memory_allocated) by job" in shown.stdout
    data = json.loads(runjob(*same, "--json", cwd=runjob_home).stdout)
    assert data["measured"]["gpu_peak_gib"] == 21.5 and data["measured"]["name"] == "lora-peak"
    other = runjob("estimate", "--model", "Llama-3.1-8B", "--kind", "lora", "--gpu", "h100", "--seq-len", "8192",
                   "--batch", "2", "--grad-checkpointing", cwd=runjob_home)
    assert other.returncode == 0 and "measured on this cluster" not in other.stdout  # other settings: no match
