"""No false endings (issue 24, item 2): 50 very short local jobs, submitted and followed by
the monitor while the machine is loaded, all end COMPLETED; none is recorded LOST or FAILED.

Before the shared detached-runner protocol read liveness first, a job that ended between the
exit-file read and the liveness read was recorded LOST (the deterministic reproduction is
``plugins/local/tests/test_local_race.py``; the RunPod stress is in its plugin's tests).
"""

from __future__ import annotations

from collections import Counter

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping
from runjob_core.testing import cpu_load, write_clusters_yaml
from runjob_core.models import ClusterConfig

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
JOBS = 50


def test_fifty_short_local_jobs_under_load_all_complete(runjob_home):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [ClusterConfig(name="here", type="local")])
    context = lifecycle.open_context()
    try:
        with cpu_load(2):
            ids = []
            for i in range(JOBS):
                job = job_from_mapping({"name": f"short-{i}", "command": f"sleep 0.{i % 10}", "cluster": "here"},
                                       source=f"short-{i}.yaml", base_dir=str(runjob_home))
                ids.append(lifecycle.submit(context, job, lifecycle.cluster_for(context, job))[0].id)
                monitor.cycle(context, ids)  # polled while the others start and end
            monitor.watch(context, ids, min_interval=0.05, max_interval=0.2)
        endings = Counter(context.store.latest_attempt(job_id).state for job_id in ids)
    finally:
        context.close()
    assert endings == Counter({"COMPLETED": JOBS}), endings
