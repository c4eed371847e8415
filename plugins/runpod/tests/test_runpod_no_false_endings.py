"""No false endings on RunPod (issue 24, item 2): 20 short jobs on pods (fake API, real sshd
pods) followed by the monitor while the machine is loaded, all end COMPLETED. Before the
status command read liveness first, 1 job of a run of 4 was recorded LOST on a busy machine."""

from __future__ import annotations

from collections import Counter

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping
from runjob_core.testing import cpu_load, write_clusters_yaml
from runjob_runpod.testing import cluster_config

pytestmark = [pytest.mark.slow]
JOBS = 20


def test_twenty_short_pod_jobs_under_load_all_complete(runjob_home, fake_runpod, pod_key):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster_config(fake_runpod, pod_key, max_usd_per_hour=100.0)])
    context = lifecycle.open_context()
    try:
        with cpu_load(2):
            ids = []
            for i in range(JOBS):
                job = job_from_mapping({"name": f"pod-short-{i}", "command": f"sleep 0.{i % 10}", "cluster": "pods",
                                        "resources": {"gpus": 1, "time": "30m"}},
                                       source=f"pod-short-{i}.yaml", base_dir=str(runjob_home))
                ids.append(lifecycle.submit(context, job, lifecycle.cluster_for(context, job))[0].id)
                monitor.cycle(context, ids)
            monitor.watch(context, ids, min_interval=0.1, max_interval=0.5)
        endings = Counter(context.store.latest_attempt(job_id).state for job_id in ids)
        for job_id in ids:
            lifecycle.collect(context, context.store.get_job(job_id))  # the pods of completed jobs go after collect
    finally:
        context.close()
    assert endings == Counter({"COMPLETED": JOBS}), endings
