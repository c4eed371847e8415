"""The real-framework tier: torch, transformers, accelerate, datasets and lm-eval, pinned in
requirements.txt beside this file, from the cached environment scripts/frameworks-env.sh
makes once per machine (outside the checkout). The tiny model, tokenizer and data are built
here, offline, once per test session. Jobs run on the real SLURM test cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).parent / "jobs"


def pytest_collection_modifyitems(items):
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.frameworks)
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def frameworks_python() -> str:
    """The frameworks environment's python (created on first use: several minutes, once)."""
    result = subprocess.run(["bash", str(ROOT / "scripts" / "frameworks-env.sh")], capture_output=True, text=True)
    if result.returncode != 0:
        reason = f"frameworks tier skipped: scripts/frameworks-env.sh failed: {result.stderr.strip()[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason.replace("skipped", "required on CI"))
        pytest.skip(reason)
    return str(Path(result.stdout.strip().splitlines()[-1]) / "bin" / "python")


@pytest.fixture(scope="session")
def tiny(frameworks_python, tmp_path_factory) -> Path:
    """A folder with model/ (2-layer GPT-2 + word-level tokenizer) and data/train.txt."""
    out = tmp_path_factory.mktemp("tiny")
    subprocess.run([frameworks_python, str(JOBS / "make_tiny.py"), str(out)], check=True, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return out


@pytest.fixture
def project(runjob_home, tiny) -> Path:
    """The job's workdir: the tier's job scripts and the tiny model, synced to the cluster."""
    work = runjob_home / "project"
    shutil.copytree(tiny, work)
    for script in JOBS.glob("*.py"):
        shutil.copy(script, work / script.name)
    return work


@pytest.fixture
def slurm_context(runjob_home, slurm_env, project):
    """A runjob context on the real SLURM test cluster (``under-test``); jobs still active at
    the end are cancelled, so no test leaves work queued for the next."""
    from runjob_core import lifecycle
    from runjob_core.testing import write_clusters_yaml
    from runjob_slurm.testing import slurm_cluster_config

    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()
