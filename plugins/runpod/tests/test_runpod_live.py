"""Opt-in: the smallest job on a real RunPod pod (RUNJOB_LIVE_RUNPOD=1 and a real RUNPOD_API_KEY).

It rents the cheapest GPU type given in RUNJOB_LIVE_RUNPOD_GPUS (comma-separated, default an RTX
4090 then an L4) with a $2 budget, runs `runjob run` to the end and checks that no pod runjob
created is left. Never run on CI: it costs money and needs the network.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runjob_core.models import ClusterConfig
from runjob_core.testing import write_clusters_yaml
from runjob_runpod._settings import RunpodSettings

pytestmark = pytest.mark.skipif(os.environ.get("RUNJOB_LIVE_RUNPOD") != "1" or not os.environ.get("RUNPOD_API_KEY"),
                                reason="live RunPod test: set RUNJOB_LIVE_RUNPOD=1 and RUNPOD_API_KEY to rent a real pod")


def test_the_smallest_job_on_a_real_pod(runjob_home, runjob_cli):
    key = Path(os.environ.get("RUNJOB_LIVE_RUNPOD_KEY", "~/.ssh/id_ed25519")).expanduser()
    gpus = tuple(os.environ.get("RUNJOB_LIVE_RUNPOD_GPUS", "NVIDIA GeForce RTX 4090,NVIDIA L4").split(","))
    options = RunpodSettings(gpu_types=gpus, cloud="any", container_disk_gb=20, max_usd_per_hour=1.0, max_usd_total=2.0)
    cluster = ClusterConfig(name="live", type="runpod", identity_file=str(key), scratch_path="/workspace", options=options)
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    (runjob_home / "job.yaml").write_text(
        "name: live-smallest\ncluster: live\nresources: {gpus: 1, time: '10m'}\n"
        "command: |\n  nvidia-smi -L\n  echo '{\"id\": 1, \"response\": \"ok\"}' > \"$RUNJOB_RESULTS/rows.jsonl\"\n")
    try:
        result = runjob_cli("run", "job.yaml", "--yes")
        assert result.exit_code == 0, result.output
        assert (runjob_home / "results" / "live-smallest" / "rows.jsonl").is_file()
    finally:
        # Only this test's pods (its own state folder knows them); other runjob pods of the
        # account are left alone.
        from runjob_runpod import _api

        mine = [p for p in json.loads(runjob_cli("pods", "--json").output)["pods"] if p["job"]]
        with _api.RunpodClient(options.api_url, os.environ["RUNPOD_API_KEY"]) as client:
            for pod in mine:
                client.terminate_pod(pod["pod"])
        assert mine == [], f"pods were still live and have been terminated now: {mine}"
