"""The RunPod cluster keys: a declared schema, one line per problem with file, key path and fix."""

from __future__ import annotations

import pytest

from runjob_core import config
from runjob_core.errors import ConfigError
from runjob_runpod import _settings


def _load(tmp_path, body: str):
    path = tmp_path / "clusters.yaml"
    path.write_text(body)
    clusters = config.load_clusters(path, backends=_backends())
    return path, clusters["pods"]


def _backends():
    from runjob_core.plugins import backend_infos, get_plugin_manager

    pm, _infos = get_plugin_manager()
    return backend_infos(pm)


def test_a_full_entry_loads_with_its_values(tmp_path):
    path, cluster = _load(tmp_path, """
clusters:
  pods:
    type: runpod
    identity_file: ~/.ssh/id_ed25519
    scratch_path: /workspace
    gpu_types: ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"]
    cloud: COMMUNITY
    container_disk_gb: 40
    network_volume_id: vol_abc
    data_centers: [US-TX-3]
    max_usd_per_hour: 10
    max_usd_total: 50
    keep_pod: true
""")
    s = _settings.for_cluster(cluster)
    assert s.gpu_types == ("NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe")
    assert (s.cloud, s.request_cloud, s.container_disk_gb, s.network_volume_id, s.volume_gb) == ("COMMUNITY", "COMMUNITY", 40, "vol_abc", None)
    assert (s.max_usd_per_hour, s.max_usd_total, s.keep_pod, s.data_centers) == (10.0, 50.0, True, ("US-TX-3",))
    assert (s.api_url, s.api_key_env) == ("https://api.runpod.io/v2", "RUNPOD_API_KEY")
    assert (_settings.identity_file(cluster), _settings.volume_path(cluster)) == ("~/.ssh/id_ed25519", "/workspace")


def _problems(raw, path="$.clusters.pods"):
    with pytest.raises(ConfigError) as caught:
        _settings.parse(raw, source="clusters.yaml", path=path)
    return caught.value.problems


def test_a_misspelled_key_gets_did_you_mean():
    assert _problems({"gpu_type": ["x"]}) == [
        "unknown key 'gpu_type' at $.clusters.pods in clusters.yaml; did you mean 'gpu_types'?"]


def test_a_wrong_type_names_the_key_path():
    (problem,) = _problems({"gpu_types": ["NVIDIA L4"], "max_usd_total": "fifty"})
    assert problem == "expected a number, got 'fifty' at $.clusters.pods.max_usd_total in clusters.yaml"


@pytest.mark.parametrize(("raw", "expected"), [
    ({}, "required key missing: list the GPU types to rent"),
    ({"gpu_types": ["NVIDIA L4"], "volume_gb": 20, "network_volume_id": "vol_1"}, "exclude each other"),
    ({"gpu_types": ["NVIDIA L4"], "volume_gb": 5}, "volume_gb must be at least 10"),
    ({"gpu_types": ["NVIDIA L4"], "cloud": "ALL"}, "cloud must be SECURE, COMMUNITY or any, not 'ALL'"),
    ({"gpu_types": ["NVIDIA L4"], "max_usd_total": 0}, "max_usd_total must be more than 0"),
    ({"gpu_types": ["NVIDIA L4"], "data_centers": ["texas"]}, "invalid data center id 'texas'"),
    ({"gpu_types": ["NVIDIA L4", "NVIDIA L4"]}, "listed twice"),
    ({"gpu_types": ["NVIDIA L4"], "api_url": "api.runpod.io"}, "invalid URL"),
])
def test_cross_field_rules(raw, expected):
    (problem,) = _problems(raw)
    assert expected in problem and "in clusters.yaml" in problem and "$.clusters.pods." in problem


def test_a_key_pasted_as_api_key_env_is_refused_without_echoing_it():
    secret = "rpa_ABCDEF0123456789-secret"
    (problem,) = _problems({"gpu_types": ["NVIDIA L4"], "api_key_env": secret})
    assert "api_key_env" in problem and secret not in problem


def test_every_problem_of_an_entry_is_reported_at_once():
    problems = _problems({"gpu_types": [], "cloud": "x", "container_disk_gb": 0})
    assert len(problems) == 3


def test_the_loader_validates_the_flat_keys_with_did_you_mean(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "clusters:\n  pods:\n    type: runpod\n    gpu_typs: [a]\n")
    path = tmp_path / "clusters.yaml"
    assert str(caught.value) == f"unknown key 'gpu_typs' at $.clusters.pods in {path} (backend 'runpod'); did you mean 'gpu_types'?"


def test_cross_field_rules_run_when_the_file_is_loaded_and_name_it(tmp_path):
    path = tmp_path / "clusters.yaml"
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, "clusters:\n  pods:\n    type: runpod\n    scratch_path: workspace\n"
                        "    gpu_types: [a]\n    volume_gb: 5\n")
    assert caught.value.problems == [
        f"volume_gb must be at least 10 (RunPod's minimum), not 5 at $.clusters.pods.volume_gb in {path}",
        f"scratch_path on a pod must be absolute (e.g. /workspace), not 'workspace' at $.clusters.pods.scratch_path in {path}",
    ]
