"""Fixtures of the RunPod tier: the fake API (real-sshd pods), a key pair, a cluster on the fake."""

from __future__ import annotations

import pytest

from runjob_core.models import ClusterConfig
from runjob_runpod.testing import cluster_config, fake_runpod, pod_key  # noqa: F401 - fixtures


@pytest.fixture
def cluster(fake_runpod, pod_key) -> ClusterConfig:  # noqa: F811 - the fixtures above
    return cluster_config(fake_runpod, pod_key)
