"""`runjob collect` of a job still running on a pod is a peek (issue 34 item 1): the pod keeps
running the job, the attempt stays RUNNING, and the collect after its end brings every row."""

from __future__ import annotations

import json

from runjob_core import lifecycle, monitor
from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_runpod.testing import cluster_config as runpod_cluster

GATED_JOB = """
name: pod-peek
cluster: pods
resources: {gpus: 1, time: "30m"}
resume: {auto: false}
command: |
  echo '{"id": 1}' > "$RUNJOB_RESULTS/rows.jsonl"
  while [ ! -e "$RUNJOB_RESULTS/../go" ]; do sleep 0.1; done
  printf '{"id": 2}\\n{"id": 3}\\n' >> "$RUNJOB_RESULTS/rows.jsonl"
"""


def _rows(path):
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def test_collect_of_a_running_pod_job_keeps_the_pod_and_the_final_collect_gets_all(runjob_home, fake_runpod, pod_key):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [runpod_cluster(fake_runpod, pod_key)])
    (runjob_home / "job.yaml").write_text(GATED_JOB)
    local = runjob_home / "results" / "pod-peek" / "rows.jsonl"
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(runjob_home / "job.yaml")
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))

        peeks = []

        def peeked_one_row():
            peeks.append(lifecycle.collect(context, row))
            return _rows(local) == [1]

        wait_until(peeked_one_row, timeout=120)
        assert len(fake_runpod.live_pods()) == 1
        assert getattr(peeks[-1], "partial", False), "the job cannot end before the test lets it"
        attempt = context.store.latest_attempt(row.id)
        assert attempt.state == "RUNNING" and attempt.released_at is None
        assert not context.store.events(row.id, kinds=("collected", "released", "pod_terminated"))
        cluster = lifecycle.job_cluster(context, row)
        context.transport(cluster, attempt.machine).run(["touch", submission.results_dir.rstrip("/") + "/../go"])
        wait_until(lambda: monitor.cycle(context, [row.id]) is not None
                   and context.store.latest_attempt(row.id).state == "COMPLETED", timeout=120)
        final = lifecycle.collect(context, row)
        assert not final.partial and final.ok, final.problems
        assert _rows(local) == [1, 2, 3]
        assert fake_runpod.live_pods() == []
        assert [e.attempt for e in context.store.events(row.id, kinds=("collected",))] == [1]
    finally:
        context.close()
