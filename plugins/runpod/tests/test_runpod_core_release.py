"""The core harvests and releases a pod (issue 25 item 3): right after the poll that saw
its job end, the core copies the attempt's files home and calls ``runjob_release``; the
plugin keeps no file of its own per attempt, and a runjob killed in between leaves no pod.

Before, RunPod terminated its pods itself inside poll and cancel, kept ``PodRecord``s and a
mirror folder under ``.runjob/runpod/``, and the core's release came only after collect."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from runjob_core import lifecycle, monitor
from runjob_core.collecting import harvest
from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_core.transport import harvested
from runjob_runpod.testing import cluster_config as runpod_cluster
from runjob_runpod.testing import only_job

JOB = """
name: pod-harvest
cluster: pods
resources: {gpus: 1, time: "30m"}
resume: {auto: false}
command: |
  echo "hello from $RUNPOD_POD_ID"
  printf '{"id": 1}\\n{"id": 2}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
  mkdir -p "$RUNJOB_RESULTS/sub" && echo '{"n": 3}' > "$RUNJOB_RESULTS/sub/meta.json"
"""


def _setup(home: Path, fake, key, text: str = JOB, **settings) -> Path:
    write_clusters_yaml(home / ".runjob" / "clusters.yaml", [runpod_cluster(fake, key, **settings)])
    job = home / "job.yaml"
    job.write_text(text)
    return job


def _kinds(context, job_id: str, *kinds: str) -> list[str]:
    return [e.kind for e in context.store.events(job_id, kinds=kinds)]


def test_the_core_returns_the_pod_right_after_the_end_and_serves_the_copy(runjob_home, fake_runpod, pod_key, runjob_cli):
    job_file = _setup(runjob_home, fake_runpod, pod_key)
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        wait_until(lambda: monitor.cycle(context, [row.id]) is not None
                   and context.store.latest_attempt(row.id).state == "COMPLETED", what="the pod job to end")
        # The cycle that saw the end also copied the files home and returned the pod: no collect yet.
        attempt = context.store.latest_attempt(row.id)
        assert attempt.released_at is not None and fake_runpod.live_pods() == []
        assert _kinds(context, row.id, "harvested", "pod_terminated", "released", "collected") == [
            "harvested", "pod_terminated", "released"]
        # Reads of the released attempt are served from the copy.
        transport = context.transport_for(attempt.submission)
        assert isinstance(transport, harvested.HarvestedCopy)
        assert f"hello from {submission.backend_job_id}" in transport.read_text(submission.log_path)
    finally:
        context.close()
    logs = runjob_cli("logs", row.id)
    assert logs.exit_code == 0 and f"hello from {submission.backend_job_id}" in logs.output
    collected = runjob_cli("collect", row.id)
    assert collected.exit_code == 0, collected.output
    results = runjob_home / "results" / "pod-harvest"
    assert [json.loads(r)["id"] for r in (results / "rows.jsonl").read_text().splitlines()] == [1, 2]
    assert json.loads((results / "sub" / "meta.json").read_text()) == {"n": 3}
    report = json.loads(runjob_cli("report", row.id, "--json").output)
    (cost,) = [a for a in report["artifacts"] if a["kind"] == "cost"]
    assert cost["location"].startswith(f"pod {submission.backend_job_id}: $")
    # Release is called once: collect found the attempt released already.
    context = lifecycle.open_context()
    try:
        assert _kinds(context, row.id, "released") == ["released"]
    finally:
        context.close()


def test_the_plugin_keeps_no_file_per_attempt(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    # Everything runjob knows of the attempt is in its store (and the core's copy of the
    # files under .runjob/attempts/): no record, mirror or pin of the plugin's own is left.
    left = sorted(p.relative_to(runjob_home).as_posix() for p in (runjob_home / ".runjob" / "runpod").rglob("*")
                  if p.is_file())
    assert left == []
    assert harvested.is_harvested(runjob_home / ".runjob", f"runjob:{only_job().id}:1")


KILL_SCRIPT = """
import pathlib, sys, time
from runjob_core import lifecycle, monitor

gate = pathlib.Path(sys.argv[1])

def killed_here(*args, **kwargs):
    gate.write_text("about to release")
    time.sleep(3600)  # the test kill -9s this process here

lifecycle.release = killed_here
context = lifecycle.open_context()
job = lifecycle.config.load_job(pathlib.Path("job.yaml"))
row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
while True:
    monitor.cycle(context, [row.id])
    time.sleep(0.2)
"""


def test_killed_between_the_end_and_the_release_the_next_status_returns_the_pod(runjob_home, fake_runpod, pod_key,
                                                                                 runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    gate = runjob_home / "gate"
    process = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(gate)], cwd=runjob_home,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: gate.exists() or process.poll() is not None, timeout=180, what="the job to end")
        assert gate.exists(), f"the runjob process exited ({process.returncode}) before it ended the job"
        assert len(fake_runpod.live_pods()) == 1  # the end is recorded, the pod not returned yet
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    job_id = only_job().id
    result = runjob_cli("status", job_id)
    assert result.exit_code == 0, result.output
    assert fake_runpod.live_pods() == []
    context = lifecycle.open_context()
    try:
        attempt = context.store.latest_attempt(job_id)
        assert attempt.state == "COMPLETED" and attempt.released_at is not None
        assert _kinds(context, job_id, "released") == ["released"]
    finally:
        context.close()
    assert "hello from" in runjob_cli("logs", job_id).output


def test_a_terminate_that_did_not_take_is_asked_again(runjob_home, fake_runpod, pod_key, monkeypatch):
    job_file = _setup(runjob_home, fake_runpod, pod_key, JOB.replace("echo \"hello", "sleep 300; echo \"hello"))
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        fake_runpod.terminate_ignored.add(submission.backend_job_id)
        lifecycle.cancel(context, context.store.get_job(row.id), wait=60)
        attempt = context.store.latest_attempt(row.id)
        assert attempt.state == "CANCELLED" and attempt.released_at is None
        failed = [e.message for e in context.store.events(row.id, kinds=("release_failed",))]
        assert failed and all("still RUNNING per the RunPod API after runjob asked to terminate it" in m for m in failed)
        assert [p.id for p in fake_runpod.live_pods()] == [submission.backend_job_id]
        # The terminate takes now: the next monitor cycle (any `runjob status`) asks again.
        fake_runpod.terminate_ignored.clear()
        monkeypatch.setattr(harvest, "RETRY_SECONDS", 0.0)
        monitor.cycle(context, [row.id])
        assert context.store.latest_attempt(row.id).released_at is not None
        assert fake_runpod.live_pods() == []
    finally:
        context.close()


def test_a_copy_that_failed_keeps_the_pod_until_a_later_cycle_copies_it(runjob_home, fake_runpod, pod_key, monkeypatch):
    job_file = _setup(runjob_home, fake_runpod, pod_key, JOB.replace("mkdir -p", "exit 3; mkdir -p"))
    real_copy = harvest._copy

    def unreachable(transport, submission, root):
        from runjob_core.errors import TransportError

        raise TransportError("connection reset by the pod's host")

    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        monkeypatch.setattr(harvest, "_copy", unreachable)
        wait_until(lambda: monitor.cycle(context, [row.id]) is not None
                   and context.store.latest_attempt(row.id).state == "FAILED", what="the pod job to fail")
        # The attempt ended, its files could not be copied: the pod is kept (nothing released).
        assert context.store.latest_attempt(row.id).released_at is None
        assert [p.id for p in fake_runpod.live_pods()] == [submission.backend_job_id]
        assert _kinds(context, row.id, "harvest_failed", "released") == ["harvest_failed"]
        monkeypatch.setattr(harvest, "_copy", real_copy)
        monkeypatch.setattr(harvest, "RETRY_SECONDS", 0.0)
        monitor.cycle(context, [row.id])
        assert context.store.latest_attempt(row.id).released_at is not None and fake_runpod.live_pods() == []
        copy = context.transport_for(context.store.latest_attempt(row.id).submission)
        assert f"hello from {submission.backend_job_id}" in copy.read_text(submission.log_path)
    finally:
        context.close()
