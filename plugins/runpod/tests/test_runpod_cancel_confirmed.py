"""A RunPod cancel is confirmed through the API: until the API stops listing the pod as
live, the attempt stays CANCELLING and the terminate is asked again (a pod that keeps
running keeps costing). Before, the attempt was recorded CANCELLED from the hook's answer."""

from __future__ import annotations

import pytest

from runjob_core import lifecycle
from runjob_core._cancel import CancelNotConfirmedError
from runjob_core.config import job_from_mapping
from runjob_core.testing import write_clusters_yaml
from runjob_runpod.testing import cluster_config


def test_a_terminate_that_did_not_take_is_not_a_confirmed_cancel(runjob_home, fake_runpod, pod_key):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster_config(fake_runpod, pod_key)])
    context = lifecycle.open_context()
    try:
        job = job_from_mapping({"name": "pod-cancel", "command": "sleep 300", "cluster": "pods",
                                "resources": {"gpus": 1, "time": "30m"}}, source="pod-cancel.yaml", base_dir=str(runjob_home))
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        fake_runpod.terminate_ignored.add(submission.backend_job_id)
        with pytest.raises(CancelNotConfirmedError, match=r"still RUNNING per the RunPod API after runjob asked to terminate it"):
            lifecycle.cancel(context, context.store.get_job(row.id), wait=3)
        assert context.store.latest_attempt(row.id).state == "CANCELLING"
        assert [p.id for p in fake_runpod.live_pods()] == [submission.backend_job_id]
        # The terminate takes now: the next cancel (or any poll) confirms it.
        fake_runpod.terminate_ignored.clear()
        lifecycle.cancel(context, context.store.get_job(row.id), wait=30)
        assert context.store.latest_attempt(row.id).state == "CANCELLED"
        assert fake_runpod.live_pods() == []
    finally:
        context.close()
