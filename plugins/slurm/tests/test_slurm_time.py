"""The time estimate on the real SLURM test cluster: the partition's MaxTime as the limit, and the
rate a job printed recorded at collect and used by the next estimate ("measured on this cluster")."""

import json
import os
import subprocess
from pathlib import Path

import attrs
import pytest
import yaml

from runjob_core import lifecycle
from runjob_core.testing import BackendContract, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm
RUNJOB = str(Path(os.sys.executable).parent / "runjob")
TRAIN = {"name": "lora", "cluster": "under-test", "template": "training", "command": "true",
         "model": {"name": "Llama-3.2-1B"}, "resources": {"partition": "gpu", "gpus": 1, "gpu_type": "h100"},
         "params": {"method": "lora", "steps": 200000, "micro_batch_size": 4, "seq_len": 2048},
         "checkpoint": {"every": "20m"}, "resume": {"max_timeouts": 500}}


@pytest.fixture
def home(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [attrs.evolve(slurm_cluster_config(slurm_env), name="under-test")])
    return runjob_home


def plan(home, spec):
    (home / "job.yaml").write_text(yaml.safe_dump(spec))
    result = subprocess.run([RUNJOB, "plan", "job.yaml", "--json"], cwd=home, capture_output=True, text=True, timeout=120)
    return json.loads(result.stdout)


def time_of(data):
    [est] = [e for e in data["estimates"] if "time" in e["data"]]
    return est


def test_without_resources_time_the_partition_maxtime_counts_the_segments(home):
    data = plan(home, TRAIN)
    est = time_of(data)
    assert est["data"]["time"]["limit_seconds"] == 3600 and est["data"]["time"]["limit_from"] == "partition"
    assert est["data"]["time"]["segments"] > 1 and not data["refused"]
    assert any("(the partition MaxTime)" in w for w in data["warnings"])
    assert any(e["summary"] == "no resources.time: partition 'gpu' allows up to 01:00:00" for e in data["estimates"])


def test_the_rate_a_job_printed_is_learned_at_collect(home):
    printed = "{'train_runtime': 12.0, 'train_samples_per_second': 8.0, 'train_steps_per_second': 2.0, 'epoch': 1.0}"
    spec = {**TRAIN, "name": "learned", "command": f"echo \"{printed}\"", "resources": {**TRAIN["resources"], "time": "5"},
            "params": {**TRAIN["params"], "steps": 100}}
    before = time_of(plan(home, spec))["data"]["time"]
    assert before["source"] == "first-principles"
    context = lifecycle.open_context()
    try:
        from runjob_core.config import job_from_mapping

        job = job_from_mapping(spec, source="job.yaml", base_dir=str(home))
        row, _ = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        assert BackendContract()._wait_terminal(context, row.id, timeout=180).state == "COMPLETED"
        lifecycle.collect(context, context.store.get_job(row.id))
        [rate] = [a for a in context.store.artifacts(row.id) if a.kind == "throughput"]
    finally:
        context.close()
    assert rate.data["tokens_per_s"] == 8.0 * 2048 and rate.data["from"] == "train_samples_per_second"
    after = time_of(plan(home, spec))
    assert after["data"]["time"]["source"] == "measured" and after["data"]["time"]["tokens_per_s"] == 8.0 * 2048
    assert "measured on this cluster" in after["summary"]
    assert after["data"]["time"]["first_principles_tokens_per_s"] == before["tokens_per_s"]
    other = time_of(plan(home, {**spec, "params": {**spec["params"], "seq_len": 1024}}))
    # other settings: another key, no measured rate of its own; the run calibrates it (same GPU, framework, kind)
    assert other["data"]["time"]["source"] == "calibrated"
    ratio = 8.0 * 2048 / before["first_principles_tokens_per_s"]
    assert other["data"]["time"]["calibration"] == pytest.approx(min(4.0, max(0.25, ratio)), rel=1e-3)
