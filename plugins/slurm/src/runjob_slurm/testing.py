"""Test helpers of the SLURM backend: the real test cluster started by
``scripts/test-cluster.sh`` (a pytest plugin: ``pytest_plugins = ["runjob_slurm.testing"]``).

* ``slurm_env``: the test cluster's connection settings; skips with one line where the
  cluster cannot run, and fails on CI (``CI=true``);
* :func:`slurm_cluster_config`: a :class:`ClusterConfig` for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runjob_core.models import ClusterConfig
from runjob_slurm._options import SlurmOptions

CLUSTER_ENV = Path(os.environ.get("RUNJOB_TEST_DIR", "/var/lib/runjob-test")) / "cluster.env"


def read_cluster_env(path: Path = CLUSTER_ENV) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            values[key.strip()] = value.strip()
    return values


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    if not CLUSTER_ENV.is_file():
        reason = f"SLURM tier skipped: {CLUSTER_ENV} not found (run: bash scripts/test-cluster.sh up, as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason.replace("skipped", "required on CI"))
        pytest.skip(reason)
    return read_cluster_env()


def slurm_cluster_config(env: dict[str, str], name: str = "testslurm", **overrides: Any) -> ClusterConfig:
    values = dict(
        name=name, type="slurm", host=env["RUNJOB_TEST_SSH_HOST"], port=int(env["RUNJOB_TEST_SSH_PORT"]),
        user=env["RUNJOB_TEST_SSH_USER"], identity_file=env["RUNJOB_TEST_SSH_KEY"],
        known_hosts=env["RUNJOB_TEST_KNOWN_HOSTS"], scratch_path=env["RUNJOB_TEST_SCRATCH"] + "/runjob-tests",
        gpu_type="h100",
        options=SlurmOptions(default_partition="debug", default_account=env.get("RUNJOB_TEST_ACCOUNT"), gres_format="typed"),
    )
    values.update(overrides)
    return ClusterConfig(**values)
