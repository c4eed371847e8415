"""Fixtures of the RunPod tier: the fake API (real-sshd pods) and a cluster pointing at it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runjob_core import execute
from runjob_core.models import ClusterConfig
from runjob_runpod.testing import fake_runpod  # noqa: F401 - a fixture

GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe")


@pytest.fixture(scope="session")
def pod_key(tmp_path_factory: Any) -> Path:
    """An ed25519 key pair for the pods (the identity_file of the test cluster)."""
    key = tmp_path_factory.mktemp("pod-key") / "id_ed25519"
    result = execute.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "runjob-runpod-test", "-f", str(key)])
    assert result.ok, result.stderr
    return key


def runpod_cluster(fake, key: Path, name: str = "pods", **settings: Any) -> ClusterConfig:
    values = {"api_url": fake.url, "gpu_types": list(GPUS), "max_usd_per_hour": 10.0, "max_usd_total": 50.0, **settings}
    return ClusterConfig(name=name, type="runpod", identity_file=str(key), scratch_path=fake.workspace, settings=values)


@pytest.fixture
def cluster(fake_runpod, pod_key) -> ClusterConfig:  # noqa: F811 - the fixture above
    return runpod_cluster(fake_runpod, pod_key)
