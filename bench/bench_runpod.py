"""The RunPod backend against raw calls, on the fake RunPod API (real HTTP, real sshd pods; root).

1. One poll of N running pods (default 20): ``runjob_poll`` vs the raw minimum it has to do
   (one ``GET /v2/pods`` with httpx, then the same status command over each pod's open
   paramiko connection). Also counts what one poll costs: API calls (target: 1) and SSH
   commands (target: at most one per running pod). Target time: at most 1.5x.
2. Submit overhead beyond pod start-up: ``lifecycle.submit`` of a small job vs creating the
   same pod and waiting for RUNNING with SSH (raw client calls). Target: at most 2 s more.

Run: .venv/bin/python bench/bench_runpod.py [--pods 20] [--reps 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_ms, show, time_interleaved  # noqa: E402

from runjob_core import lifecycle  # noqa: E402
from runjob_core.transport import execute  # noqa: E402
from runjob_core.testing import write_clusters_yaml  # noqa: E402
from runjob_runpod import _api, _fakepod, _pods, _ssh  # noqa: E402
from runjob_runpod.testing import API_KEY, FakeRunpod, cluster_config  # noqa: E402

JOB = "name: bench-{i}\ncluster: pods\nresources: {{gpus: 1, time: '30m'}}\ncommand: sleep 600\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    why = _fakepod.can_run()
    if why:
        sys.exit(f"cannot run the fake RunPod here: {why}")
    with tempfile.TemporaryDirectory(prefix="runjob-bench-runpod-") as tmp:
        root = Path(tmp)
        key = root / "id_ed25519"
        execute.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        fake = FakeRunpod(root / "fake", workspace=str(root / "fake" / "workspace"))
        os.environ["RUNPOD_API_KEY"] = API_KEY
        work = root / "work"
        work.mkdir()
        os.chdir(work)
        cluster = cluster_config(fake, key)
        write_clusters_yaml(work / ".runjob" / "clusters.yaml", [cluster])
        context = lifecycle.open_context()
        try:
            bench_poll(context, fake, key, args.pods, args.reps)
            bench_submit(context, fake, key, args.reps)
        finally:
            for row in context.store.list_jobs(limit=1000):
                lifecycle.cancel(context, row)
            context.close()
            left = fake.close()
            if left:
                print(f"pods left running: {left}")


def _submit(context, i: int):
    path = Path(f"job{i}.yaml")
    path.write_text(JOB.format(i=i))
    job = lifecycle.config.load_job(path)
    return lifecycle.submit(context, job, lifecycle.cluster_for(context, job))[1]


def bench_poll(context, fake, key, n: int, reps: int) -> None:
    submissions = [_submit(context, i) for i in range(n)]
    cluster = context.clusters["pods"]
    poll = context.hook("runjob_poll", "runpod")

    def ssh_commands() -> int:
        return sum(len(t.ssh.commands) for t in context._transports.values() if hasattr(t, "ssh"))

    def runjob_poll():
        statuses = poll(submissions=submissions, cluster=cluster, context=context)
        assert all(s.state == "RUNNING" for s in statuses.values()), statuses

    client = _api.RunpodClient(fake.url, API_KEY)
    raw_ssh = {}
    for sub in submissions:
        pod = client.get_pod(sub.backend_job_id)
        raw_ssh[pod.id] = _ssh.connect(cluster, str(key), pod.id, pod.ssh_host, pod.ssh_port, "root", Path(context.state_dir) / "raw")
    files = {s.backend_job_id: _ssh.JobFiles(s.job_dir, "", s.log_path, s.attempt) for s in submissions}

    def raw_poll():
        pods = client.list_pods(name_prefix="runjob-")
        assert len(pods) == n
        for pod in pods:
            raw_ssh[pod.id].run_shell(_ssh.status_command(files[pod.id]))

    runjob_poll(), raw_poll()  # warm: connections open on both sides
    api_before = len(fake.log)
    ssh_before = ssh_commands()
    runjob_poll()
    api_calls = len(fake.log) - api_before
    ssh_used = ssh_commands() - ssh_before
    ours, raw = time_interleaved([runjob_poll, raw_poll], reps)
    show(f"poll of {n} running pods", [("raw: GET /v2/pods + one paramiko exec per pod", raw),
                                       ("runjob_poll (runjob-runpod)", ours)], target="at most 1.5x")
    print(f"  one poll: {api_calls} API call(s), {ssh_used} SSH command(s) for {n} running pods "
          f"(target: 1 and at most {n})")
    for transport in raw_ssh.values():
        transport.close()
    client.close()
    for sub in submissions:
        lifecycle.cancel(context, context.store.get_job(sub.job_id))


def bench_submit(context, fake, key, reps: int) -> None:
    client = _api.RunpodClient(fake.url, API_KEY)
    public = Path(str(key) + ".pub").read_text().strip()
    settings = _pods.settings_for(context.clusters["pods"], context)
    counter = iter(range(1000, 100000))

    def raw_start():
        body = _pods.create_body(settings, name=f"runjob-raw-{next(counter)}", gpu_id=settings.gpu_types[0], gpu_count=1,
                                    public_key=public, tag="raw", volume_path=fake.workspace)
        pod = client.create_pod(body)
        while not pod.reachable:
            time.sleep(0.2)
            pod = client.get_pod(pod.id)
        client.terminate_pod(pod.id)

    def runjob_submit():
        sub = _submit(context, next(counter))
        lifecycle.cancel(context, context.store.get_job(sub.job_id))

    ours, raw = time_interleaved([runjob_submit, raw_start], reps)
    show("submit of a small job", [("raw: create pod, wait RUNNING with ssh.direct (then terminate)", raw),
                                   ("lifecycle.submit (then cancel)", ours)])
    print(f"  overhead beyond pod start-up: {median_ms(ours) - median_ms(raw):.0f} ms (target: at most 2000 ms; "
          "runjob's side includes staging, starting the job and cancel + terminate)")
    client.close()


if __name__ == "__main__":
    main()
