"""`runjob clusters check` rows of a RunPod cluster (no pod is created by a check) and the cost estimate."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from runjob_core import lifecycle
from runjob_core.errors import ConfigError
from runjob_core.testing import write_clusters_yaml
from runjob_runpod import _checks
from runjob_runpod.testing import cluster_config


def _context(home, cluster):
    write_clusters_yaml(home / ".runjob" / "clusters.yaml", [cluster])
    return lifecycle.open_context()


def _rows(home, cluster):
    context = _context(home, cluster)
    try:
        return {r.check: r for r in _checks.check_cluster(context.clusters[cluster.name], context)}
    finally:
        context.close()


def test_a_good_cluster_passes_every_row_without_a_pod(runjob_home, fake_runpod, pod_key):
    rows = _rows(runjob_home, cluster_config(fake_runpod, pod_key))
    assert all(r.ok for r in rows.values()), rows
    assert set(rows) == {"settings", "API key", "SSH key", "GPU types", "budget"}
    assert "NVIDIA H100 80GB HBM3 ($2.69/h, 80 GB)" in rows["GPU types"].detail
    assert fake_runpod.requests("POST") == [] and [m for m, _p, _s in fake_runpod.log] == ["GET"]


def test_each_failure_has_its_fix(runjob_home, fake_runpod, pod_key, monkeypatch, tmp_path):
    monkeypatch.setenv("RUNPOD_API_KEY", "rp_wrong")
    cluster = cluster_config(fake_runpod, tmp_path / "no-such-key", gpu_types=["NVIDIA H100 80GB HBM3"])
    cluster = attrs.evolve(cluster, options=attrs.evolve(cluster.options, max_usd_total=None))
    rows = _rows(runjob_home, cluster)
    assert not rows["API key"].ok and "RUNPOD_API_KEY" in rows["API key"].fix and "rp_wrong" not in rows["API key"].detail
    assert not rows["SSH key"].ok and "ssh-keygen" in rows["SSH key"].detail
    assert not rows["budget"].ok and "max_usd_total" in rows["budget"].fix


def test_unknown_gpu_types_are_named(runjob_home, fake_runpod, pod_key):
    rows = _rows(runjob_home, cluster_config(fake_runpod, pod_key, gpu_types=["NVIDIA H100 80GB HBM3", "NVIDIA H101"]))
    assert not rows["GPU types"].ok and rows["GPU types"].detail == "not in the catalog: NVIDIA H101"


def test_bad_settings_are_refused_with_the_file_and_are_one_row_for_a_cluster_built_in_code(runjob_home, fake_runpod,
                                                                                         pod_key):
    bad = cluster_config(fake_runpod, pod_key, cloud="ANY")
    # In clusters.yaml: the core runs the declared rules when it loads the file (one line, key path).
    with pytest.raises(ConfigError) as caught:
        _context(runjob_home, bad)
    assert caught.value.problems == [f"cloud must be SECURE, COMMUNITY or any, not 'ANY' at $.clusters.pods.cloud in "
                                     f"{runjob_home / '.runjob' / 'clusters.yaml'}"]
    # Built in code (never loaded from a file): the check's one row says it.
    good = _context(runjob_home, cluster_config(fake_runpod, pod_key))
    try:
        rows = {r.check: r for r in _checks.check_cluster(attrs.evolve(bad, source="code"), good)}
    finally:
        good.close()
    assert list(rows) == ["settings"] and "cloud must be SECURE, COMMUNITY or any" in rows["settings"].detail


def test_the_estimate_prices_the_dearest_affordable_type_for_the_time_limit(runjob_home, fake_runpod, pod_key):
    context = _context(runjob_home, cluster_config(fake_runpod, pod_key, max_usd_per_hour=4.0))
    try:
        job = lifecycle.config.job_from_mapping({"name": "e", "command": "true", "cluster": "pods",
                                                 "resources": {"gpus": 2, "time": "2h"}}, source="e.yaml")
        estimate = _checks.estimate(job, context.clusters["pods"], context)
        # 2 x H100 = $5.38/h is over $4/h: only 2 x A100 ($3.28/h) may be rented; 2 h -> $6.56.
        assert estimate.fits is True and estimate.data["usd_per_hour"] == {"NVIDIA A100 80GB PCIe": 3.28}
        assert "up to $6.56 on RunPod" in estimate.summary and estimate.data["vram_gb"] == {"NVIDIA A100 80GB PCIe": 80}
        untimed = attrs.evolve(job, resources=attrs.evolve(job.resources, time=None))
        assert _checks.estimate(untimed, context.clusters["pods"], context).fits is False
    finally:
        context.close()


LLAMA = str(Path(__file__).parents[3] / "tests" / "data" / "model_configs" / "meta-llama--Llama-3.1-8B")


def test_the_memory_estimate_uses_the_smallest_gpu_the_pod_may_get(runjob_home, fake_runpod, pod_key):
    job_raw = {"name": "m", "command": "true", "cluster": "pods", "model": {"path": LLAMA},
               "resources": {"gpus": 1, "time": "1h"}}
    context = _context(runjob_home, cluster_config(fake_runpod, pod_key,
                                                   gpu_types=["NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"]))
    try:
        job = lifecycle.config.job_from_mapping(job_raw, source="m.yaml")
        refused = _checks.estimate(job, context.clusters["pods"], context)
        assert refused.fits is False and "(on NVIDIA GeForce RTX 4090, the smallest of gpu_types)" in refused.summary
        assert refused.suggestions[0] == "drop NVIDIA GeForce RTX 4090 from gpu_types (keep NVIDIA H100 80GB HBM3)"
    finally:
        context.close()
    context = _context(runjob_home, cluster_config(fake_runpod, pod_key, gpu_types=["NVIDIA H100 80GB HBM3"]))
    try:
        fits = _checks.estimate(job, context.clusters["pods"], context)
        assert fits.fits is True and "memory on NVIDIA H100 80GB HBM3:" in fits.summary and "up to $2.69" in fits.summary
    finally:
        context.close()
