"""Pre-flight on a RunPod cluster (the fake API): the time estimate's GPU-hours priced at the pod's rate."""

from __future__ import annotations

import pytest

from runjob_core import lifecycle
from runjob_core.config import job_from_mapping
from runjob_core.testing import write_clusters_yaml
from runjob_runpod.testing import cluster_config


def test_the_time_estimate_costs_the_work_in_dollars(runjob_home, fake_runpod, pod_key):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [cluster_config(fake_runpod, pod_key, gpu_types=["NVIDIA H100 80GB HBM3"])])
    context = lifecycle.open_context()
    try:
        job = job_from_mapping({"name": "ft", "command": "true", "cluster": "pods", "template": "training",
                                "model": {"name": "Llama-3.2-1B"},
                                "resources": {"gpus": 2, "gpu_type": "h100", "time": "2h"},
                                "params": {"method": "lora", "steps": 3000, "micro_batch_size": 8, "seq_len": 2048},
                                "checkpoint": {"every": "20m"}}, source="ft.yaml")
        checks = lifecycle.preflight(context, job, lifecycle.cluster_for(context, job))
    finally:
        context.close()
    [price] = [e for e in checks.estimates if "usd_per_hour" in e.data]
    [est] = [e for e in checks.estimates if "time" in e.data]
    t = est.data["time"]
    per_hour = price.data["usd_per_hour"]["NVIDIA H100 80GB HBM3"]
    assert per_hour == pytest.approx(2 * 2.69)  # the fake catalog's price x 2 GPUs
    assert t["usd_per_hour"] == per_hour and t["usd"] == pytest.approx(per_hour * t["total_seconds"] / 3600, abs=0.01)
    assert t["gpu_hours"] == pytest.approx(2 * t["total_seconds"] / 3600)
    assert f"(${t['usd']:,.2f} on RunPod)" in est.summary
