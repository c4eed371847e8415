"""Whole jobs on the fake RunPod (real HTTP, real sshd pods): the paths that rent and return pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_runpod import _pods

from runjob_runpod.testing import cluster_config as runpod_cluster
from runjob_runpod.testing import only_job

RESULTS_JOB = """
name: pod-rows
cluster: pods
resources: {gpus: 1, time: "30m"}
command: |
  echo "pod=$RUNPOD_POD_ID tag=$RUNJOB_TAG"
  printf '{"id": 1, "response": "a"}\\n{"id": 2, "response": "b"}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
"""


def _setup(home: Path, fake, key, job_text: str = RESULTS_JOB, **settings) -> Path:
    write_clusters_yaml(home / ".runjob" / "clusters.yaml", [runpod_cluster(fake, key, **settings)])
    job = home / "job.yaml"
    job.write_text(job_text)
    return job


def _events(kinds=None):
    context = lifecycle.open_context()
    try:
        return [e for e in context.store.events(None) if kinds is None or e.kind in kinds]
    finally:
        context.close()


def test_a_job_end_to_end_results_collected_and_pod_terminated(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    rows = (runjob_home / "results" / "pod-rows" / "rows.jsonl").read_text().splitlines()
    assert [json.loads(r)["id"] for r in rows] == [1, 2]
    (pod,) = fake_runpod.gone.values()
    assert fake_runpod.live_pods() == []
    # The pod's env (given at creation) reached the job through /proc/1/environ; the core
    # copied its log home before it returned the pod.
    log = next((runjob_home / ".runjob" / "attempts").rglob("*.out")).read_text()
    assert f"pod={pod.id} tag=runjob:" in log
    row = only_job()
    report = json.loads(runjob_cli("report", row.id, "--json").output)
    (cost,) = [a for a in report["artifacts"] if a["kind"] == "cost"]
    assert cost["location"].startswith(f"pod {pod.id}: $") and cost["location"].endswith("at $2.69/h")
    # With the pod gone, `runjob logs` reads the copy runjob kept.
    assert f"pod={pod.id}" in runjob_cli("logs", row.id).output
    terminated = _events({"pod_terminated"})
    assert [e.data["pod_id"] for e in terminated] == [pod.id]
    assert [e.kind for e in _events({"harvested", "released"})] == ["harvested", "released"]
    # The request carried the v2 fields: one GPU type, cloud, disk, the SSH port, the key.
    body = pod.body
    assert body["gpu"] == {"id": "NVIDIA H100 80GB HBM3", "count": 1} and body["ports"] == ["22/tcp"]
    assert body["env"]["PUBLIC_KEY"] == Path(str(pod_key) + ".pub").read_text().strip()
    assert body["name"].startswith("runjob-rj-") and body["cloud"] == "SECURE"


def test_no_capacity_falls_back_to_the_next_gpu_type(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    fake_runpod.capacity["NVIDIA H100 80GB HBM3"] = 0
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    (pod,) = fake_runpod.gone.values()
    assert pod.gpu["id"] == "NVIDIA A100 80GB PCIe"
    assert [s for _m, _p, s in fake_runpod.requests("POST", r"^/v2/pods$")] == [400, 201]
    assert any("trying the next GPU type" in e.message for e in _events({"provisioning"}))


def test_no_capacity_anywhere_is_one_line_and_nothing_rented(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    fake_runpod.capacity.update({"NVIDIA H100 80GB HBM3": 0, "NVIDIA A100 80GB PCIe": 0})
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 1
    assert "placed no pod" in result.output and "Traceback" not in result.output
    assert fake_runpod.pods == {} and fake_runpod.gone == {}


def test_a_429_storm_is_waited_out(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key)
    fake_runpod.fail(429, times=4, retry_after=1)
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    assert len([r for r in fake_runpod.log if r[2] == 429]) == 4
    assert fake_runpod.live_pods() == [] and len(fake_runpod.gone) == 1


def test_over_budget_is_refused_before_any_pod(runjob_home, fake_runpod, pod_key, runjob_cli):
    # 1 x H100 at $2.69/h for 24 h is $64.56: over max_usd_total = 50.
    _setup(runjob_home, fake_runpod, pod_key, RESULTS_JOB.replace('time: "30m"', 'time: "24h"'))
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 1
    assert "up to $64.56 on RunPod" in result.output and "max_usd_total=50" in result.output
    assert fake_runpod.requests("POST") == []


def test_a_refused_key_stops_with_one_line(runjob_home, fake_runpod, pod_key, runjob_cli, monkeypatch):
    _setup(runjob_home, fake_runpod, pod_key)
    monkeypatch.setenv("RUNPOD_API_KEY", "rp_not_the_right_one")
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 1
    assert "refused the API key in $RUNPOD_API_KEY" in result.output and "rp_not_the_right_one" not in result.output
    assert "Traceback" not in result.output and fake_runpod.pods == {}


@pytest.mark.parametrize("how", ["EXITED", "TERMINATED"])
def test_a_pod_lost_under_its_job_is_lost_and_returned(runjob_home, fake_runpod, pod_key, how):
    text = RESULTS_JOB.replace('echo "pod=', 'sleep 60; echo "pod=') + "resume: {auto: false}\n"
    job_file = _setup(runjob_home, fake_runpod, pod_key, text)
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        monitor.cycle(context, [row.id])
        assert context.store.latest_attempt(row.id).state == "RUNNING"
        fake_runpod.lose(submission.backend_job_id, how)
        monitor.cycle(context, [row.id])
        latest = context.store.latest_attempt(row.id)
        assert latest.state == "LOST" and submission.backend_job_id in latest.reason, (latest.state, latest.reason)
        assert [e.kind for e in context.store.events(row.id, kinds=("resume_skipped", "resuming"))] == ["resume_skipped"]
    finally:
        context.close()
    assert fake_runpod.pods == {}  # an EXITED pod still bills its disk: terminated too


def test_killed_while_provisioning_then_run_again_rents_one_pod(runjob_home, fake_runpod, pod_key, runjob_cli):
    import signal
    import subprocess
    import sys

    _setup(runjob_home, fake_runpod, pod_key)
    fake_runpod.hold_provisioning = True
    first = subprocess.Popen([sys.executable, "-m", "runjob_core", "run", "job.yaml", "--yes"], cwd=runjob_home,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: fake_runpod.pods and fake_runpod.requests("GET", r"^/v2/pods/"), timeout=120,
                   what="runjob to wait for its pod")
    finally:
        first.send_signal(signal.SIGKILL)  # no cleanup at all: the pod is left provisioning
        first.wait()
    assert len(fake_runpod.pods) == 1
    fake_runpod.hold_provisioning = False
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    assert len(fake_runpod.requests("POST", r"^/v2/pods$")) == 1
    assert fake_runpod.pods == {} and len(fake_runpod.gone) == 1


def test_interrupted_while_provisioning_returns_the_pod(runjob_home, fake_runpod, pod_key, monkeypatch):
    job_file = _setup(runjob_home, fake_runpod, pod_key)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # ^C while the pod was starting

    monkeypatch.setattr(_pods, "_wait_running", interrupted)
    job = lifecycle.config.load_job(job_file)
    context = lifecycle.open_context()
    try:
        with pytest.raises(KeyboardInterrupt):
            lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
    finally:
        context.close()
    assert fake_runpod.pods == {} and len(fake_runpod.gone) == 1


def test_a_changed_host_key_is_refused(runjob_home, fake_runpod, pod_key):
    job_file = _setup(runjob_home, fake_runpod, pod_key, RESULTS_JOB.replace('echo "pod=', 'sleep 60; echo "pod='))
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        context.close()  # drop the open connection: the next one meets the new key
        fake_runpod.rekey(submission.backend_job_id)
        monitor.cycle(context, [row.id])
        transient = [e for e in context.store.events(row.id) if e.kind == "transient"]
        assert transient and "does not match known_hosts" in transient[-1].message
        assert "not the machine runjob rented" in transient[-1].message
        assert lifecycle.cancel(context, context.store.get_job(row.id))
    finally:
        context.close()
    assert fake_runpod.pods == {}


def test_keep_pod_leaves_the_pod_and_says_so(runjob_home, fake_runpod, pod_key, runjob_cli):
    _setup(runjob_home, fake_runpod, pod_key, keep_pod=True)
    result = runjob_cli("run", "job.yaml", "--yes")
    assert result.exit_code == 0, result.output
    (live,) = fake_runpod.live_pods()
    assert [e.data["pod_id"] for e in _events({"pod_kept"})] == [live.id]
    live.machine.kill()
    fake_runpod._delete(live)  # the user returns it (runjob never would with keep_pod)


RESUMING_JOB = """
name: pod-resume
cluster: pods
resources: {gpus: 1, time: "30m"}
command: |
  ck="$RUNJOB_CHECKPOINT_DIR/step"
  if [ -f "$ck" ]; then
    echo "resumed from step $(cat "$ck") on $RUNPOD_POD_ID"
    printf '{"id": 2}\\n' >> "$RUNJOB_RESULTS/rows.jsonl"
    exit 0
  fi
  printf '{"id": 1}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
  echo 5 > "$ck"
  printf '{"step": 5, "rows_done": 1}' > "$RUNJOB_PROGRESS"
  sleep 300
"""


def test_a_lost_pod_is_resumed_on_a_new_pod_from_its_network_volume(runjob_home, fake_runpod, pod_key):
    job_file = _setup(runjob_home, fake_runpod, pod_key, RESUMING_JOB, network_volume_id="vol_runjob_test")
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, first = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))

        def checkpointed():
            monitor.cycle(context, [row.id])
            return context.store.latest_attempt(row.id).step == 5

        wait_until(checkpointed, what="the first attempt's checkpoint")
        fake_runpod.lose(first.backend_job_id, "TERMINATED")  # the host is gone, and the pod with it
        monitor.watch(context, [row.id], min_interval=0.2, max_interval=1)
        attempts = context.store.attempts(row.id)
        assert [(a.n, a.state) for a in attempts] == [(1, "LOST"), (2, "COMPLETED")]
        assert attempts[1].backend_job_id != first.backend_job_id
        resuming = [e.message for e in context.store.events(row.id, kinds=("resuming",))]
        assert len(resuming) == 1 and "network volume vol_runjob_test" in resuming[0]
        collected = lifecycle.collect(context, context.store.get_job(row.id))
        assert collected.ok
    finally:
        context.close()
    rows = (runjob_home / "results" / "pod-resume" / "rows.jsonl").read_text().splitlines()
    assert [json.loads(r)["id"] for r in rows] == [1, 2]
    assert fake_runpod.pods == {} and len(fake_runpod.gone) == 2


def test_runjob_pods_lists_and_terminates_what_runjob_rents(runjob_home, fake_runpod, pod_key, runjob_cli):
    job_file = _setup(runjob_home, fake_runpod, pod_key, RESULTS_JOB.replace('echo "pod=', 'sleep 300; echo "pod='))
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(job_file)
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
    finally:
        context.close()
    listed = json.loads(runjob_cli("pods", "--json").output)["pods"]
    assert [(p["pod"], p["job"], p["status"], p["usd_per_hour"]) for p in listed] == [
        (submission.backend_job_id, row.id, "RUNNING", 2.69)]
    result = runjob_cli("pods", "--terminate")
    assert result.exit_code == 0 and submission.backend_job_id in result.output
    assert fake_runpod.pods == {}
    assert runjob_cli("pods").output.strip() == "no live pods created by runjob"


PEAK_JOB = """
name: pod-peak
cluster: pods
template: training
model: {name: Llama-3.1-8B}
params: {method: lora, seq_len: 4096, micro_batch_size: 2, gradient_checkpointing: true}
resources: {gpus: 1, gpu_type: h100, time: "30m"}
command: |
  echo "peak: torch.cuda.max_memory_allocated() = 21.5 GiB"
  printf '{"id": 1}\\n' > "$RUNJOB_RESULTS/rows.jsonl"
"""


def test_the_gpu_peak_a_pod_job_printed_corrects_the_next_estimate(runjob_home, fake_runpod, pod_key, runjob_cli):
    # the learning loop on RunPod: collect reads the peak from the log copied off the pod
    _setup(runjob_home, fake_runpod, pod_key, PEAK_JOB)
    result = runjob_cli("run", "job.yaml", "--yes", "--force")
    assert result.exit_code == 0, result.output
    same = ["estimate", "--model", "Llama-3.1-8B", "--kind", "lora", "--gpu", "h100", "--seq-len", "4096",
            "--batch", "2", "--grad-checkpointing"]
    shown = runjob_cli(*same)
    assert shown.exit_code == 0, shown.output
    assert "measured on this cluster: 21.5 GiB GPU peak (torch.cuda.max_memory_allocated) by job" in shown.output
    other = runjob_cli(*same[:-3], "--batch", "4", "--grad-checkpointing")
    assert other.exit_code == 0 and "measured on this cluster" not in other.output  # other settings: no match
