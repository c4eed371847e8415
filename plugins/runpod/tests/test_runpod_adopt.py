"""A lost store and a job on a pod (issue 34 item 5): the pod keeps its name (the tag), the
job's folder its runjob.json; a submit of the same spec follows the pod instead of renting
another, `status --adopt`'s adoption after another loss follows it to its end, and the
collect after the end terminates the pod (the adopted attempt knows its machine)."""

from __future__ import annotations

import json

from runjob_core import adopt, lifecycle, monitor
from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_runpod.testing import cluster_config as runpod_cluster

GATED_JOB = """
name: pod-adopt
cluster: pods
resources: {gpus: 1, time: "30m"}
resume: {auto: false}
command: |
  while [ ! -e "$RUNJOB_RESULTS/../go" ]; do sleep 0.1; done
  printf '{"id": 1}\\n{"id": 2}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
"""


def _lose_the_store(home) -> None:
    for path in (home / ".runjob").glob("state.db*"):
        path.unlink()


def test_a_pod_job_of_a_lost_store_is_followed_adopted_and_its_pod_released(runjob_home, fake_runpod, pod_key):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [runpod_cluster(fake_runpod, pod_key)])
    (runjob_home / "job.yaml").write_text(GATED_JOB)
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(runjob_home / "job.yaml")
        row, first = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
    finally:
        context.close()
    _lose_the_store(runjob_home)

    context = lifecycle.open_context()
    try:
        again, followed = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        assert (again.id, followed.backend_job_id) == (row.id, first.backend_job_id)
        (event,) = context.store.events(row.id, kinds=("adopted",))
        assert "a job with this spec's tag is running on pods" in event.message
        assert len(fake_runpod.live_pods()) == 1          # no second pod rented
    finally:
        context.close()
    _lose_the_store(runjob_home)

    context = lifecycle.open_context()
    try:
        found, lines = adopt.untracked(context, [context.clusters["pods"]])
        assert [(f.job_id, f.why_not) for f in found] == [(row.id, None)], (found, lines)
        adopted, submission = adopt.adopt(context, found[0])
        assert submission is not None and submission.machine is not None
        attempt = context.store.latest_attempt(row.id)
        assert attempt.machine is not None and attempt.machine.id == first.backend_job_id
        cluster = lifecycle.job_cluster(context, adopted)
        context.transport(cluster, attempt.machine).run(["touch", submission.results_dir.rstrip("/") + "/../go"])
        wait_until(lambda: monitor.cycle(context, [row.id]) is not None
                   and context.store.latest_attempt(row.id).state == "COMPLETED", timeout=120)
        final = lifecycle.collect(context, context.store.get_job(row.id))
        assert not final.partial and final.ok, final.problems
        rows = (runjob_home / "results" / "pod-adopt" / "rows.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in rows] == [1, 2]
        assert fake_runpod.live_pods() == []               # the adopted attempt's pod was released
    finally:
        context.close()
