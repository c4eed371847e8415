"""Learning from runs: parsing what a job measured, and finding it again by model and settings."""

from __future__ import annotations

import pytest

from runjob_core.config import job_from_mapping
from runjob_core.estimator import estimate, measured
from runjob_core.models import ClusterConfig
from runjob_core.store import Store

GIB = 1 << 30


@pytest.mark.parametrize("log, peak, how", [
    ("step 10 loss 1.2\ntorch.cuda.max_memory_allocated() = 35.25 GiB\n", 35.25 * GIB, "torch.cuda.max_memory_allocated"),
    ("max_memory_reserved: 36091 MiB\n", 36091 << 20, "torch.cuda.max_memory_reserved"),
    ("rank0 max_memory_allocated 2.5 GB\nrank1 max_memory_allocated 3.0 GB\n", 3e9, "torch.cuda.max_memory_allocated"),
    ("max_memory_allocated=31000000000\n", 31_000_000_000, "torch.cuda.max_memory_allocated"),
    ("|  0  NVIDIA H100 80GB HBM3  On |  00000000:18:00.0 Off |\n| N/A   34C  P0  120W / 700W |  35210MiB / 81559MiB |\n",
     35210 << 20, "nvidia-smi"),
    ("memory.used [MiB]\n1024 MiB\n40960 MiB\n", 40960 << 20, "nvidia-smi"),
])
def test_gpu_peak_from_log(log, peak, how):
    assert measured.gpu_peak_from_log(log) == (int(peak), how)


def test_nothing_reported_is_none_and_maxrss_units():
    assert measured.gpu_peak_from_log("epoch 1 done\n") is None
    assert measured.maxrss_bytes("123456K") == 123456 << 10
    assert measured.maxrss_bytes("1.5G") == int(1.5 * GIB)
    assert measured.maxrss_bytes("") is None and measured.maxrss_bytes(None) is None


def test_artifact_key_matches_the_same_settings_only(tmp_path):
    cluster = ClusterConfig(name="c", type="slurm", gpu_type="h100")
    job = job_from_mapping({"name": "gen", "command": "python gen.py", "template": "vllm",
                            "model": {"name": "Llama-3.1-8B", "max_model_len": 8192},
                            "resources": {"gpus": 1}}, source="gen.yaml")
    art = measured.memory_artifact(job, cluster, "max_memory_reserved: 70 GiB", "2048000K", "test")
    assert art.kind == "memory" and art.data["gpu_peak_gib"] == 70 and art.data["engine"] == "vllm"
    store = Store(tmp_path / "state.db")
    try:
        job_id = store.create_job(name="gen", cluster="c", backend="slurm", spec_json="{}", spec_hash="h", spec_path=None)
        store.add_artifact(job_id, attempt=1, name=art.name, kind=art.kind, location=art.location, source=art.source,
                           data=art.data)
        same = estimate("Llama-3.1-8B", "inference", "H100", max_model_len=8192)
        seen = measured.lookup(store, same)
        assert seen["job"] == job_id and seen["gpu_peak_gib"] == 70 and seen["max_rss_gib"] == pytest.approx(1.953, abs=1e-3)
        assert "measured on this cluster: 70.0 GiB GPU peak" in measured.describe(seen)
        assert measured.lookup(store, estimate("Llama-3.1-8B", "inference", "H100", max_model_len=4096)) is None
        assert measured.lookup(store, estimate("Llama-3.1-8B", "inference", "H100", max_model_len=8192, engine="hf")) is None
    finally:
        store.close()
