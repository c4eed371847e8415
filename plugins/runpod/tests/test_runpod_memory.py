"""A RunPod job's GPU peak, read from its log once it is copied off the pod, is recorded
beside the estimate (the same ``memory`` artifact SLURM and local jobs leave)."""

from __future__ import annotations

import json

from runjob_core.testing import write_clusters_yaml
from runjob_runpod.testing import cluster_config as runpod_cluster
from runjob_runpod.testing import only_job

PEAK_JOB = """
name: pod-peak
cluster: pods
resources: {gpus: 1, time: "30m"}
command: |
  echo "max_memory_reserved: 20480 MiB"
  printf '{"id": 1}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
"""


def test_the_peak_a_pod_job_prints_is_recorded(runjob_home, fake_runpod, pod_key, runjob_cli):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [runpod_cluster(fake_runpod, pod_key)])
    (runjob_home / "job.yaml").write_text(PEAK_JOB)
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    job_id = only_job(runjob_home).id
    report = json.loads(runjob_cli("report", job_id, "--json").output)
    (memory,) = [a for a in report["artifacts"] if a["kind"] == "memory"]
    assert memory["location"].startswith("GPU peak 20.0 GiB (torch.cuda.max_memory_reserved)")
