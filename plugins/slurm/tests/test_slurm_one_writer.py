"""One writer per job (issue 19, item 1) against the real SLURM cluster: concurrent runjob
processes over one state store submit each attempt exactly once; the others follow.

Counts come from the scheduler itself (``squeue -t all`` lists every job of the last
MinJobAge), not from runjob's store, so a submission runjob forgot would still be seen.
"""

import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs
import pytest
import yaml

from runjob_core import lifecycle
from runjob_core.testing import BackendContract, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
RUNJOB = str(Path(sys.executable).parent / "runjob")


@pytest.fixture
def cluster(slurm_env):
    return slurm_cluster_config(slurm_env, name="under-test")


@pytest.fixture
def home(runjob_home, cluster):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    return runjob_home


def unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


def scheduler_jobs(ctx, name: str) -> list[tuple[str, str]]:
    """(SLURM id, comment) of every job called *name* the scheduler knows (queued or ended)."""
    transport = ctx.transport(ctx.clusters["under-test"])
    result = transport.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i|%k"])
    assert result.ok, result.stderr
    return [tuple(line.split("|", 1)) for line in result.stdout.splitlines() if line.strip()]


def cli(*args, env=None, timeout=300):
    return subprocess.run([RUNJOB, *args], capture_output=True, text=True, timeout=timeout, env=env)


def start(*args, env=None):
    return subprocess.Popen([RUNJOB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_three_concurrent_runs_of_one_spec_submit_once(home):
    name = unique("twice")
    command = 'sleep 3; mkdir -p "$RUNJOB_RESULTS"; echo \'{"id": 1}\' > "$RUNJOB_RESULTS/out.jsonl"'
    (home / "job.yaml").write_text(yaml.safe_dump({"name": name, "cluster": "under-test", "command": command}))
    runs = [start("run", "job.yaml", "--yes") for _ in range(3)]
    outputs = [run.communicate(timeout=300) for run in runs]
    for run, (_out, err) in zip(runs, outputs):
        assert run.returncode == 0, err
        assert "Traceback" not in err
    jobs = json.loads(cli("status", "--json", "--no-refresh").stdout)
    assert [(j["name"], len(j["attempts"]), j["state"]) for j in jobs] == [(name, 1, "COMPLETED")]
    ctx = lifecycle.open_context()
    try:
        assert len(scheduler_jobs(ctx, name)) == 1
    finally:
        ctx.close()


def test_two_watches_over_an_auto_resume_resubmit_once(home):
    name = unique("resumed")
    # Attempt 1 writes a row and asks to be resumed (exit 75); attempt 2 writes the rest.
    command = """mkdir -p "$RUNJOB_RESULTS"
if [ "$RUNJOB_ATTEMPT" = 1 ]; then echo '{"id": 1}' >> "$RUNJOB_RESULTS/out.jsonl"; sleep 3; exit 75; fi
echo '{"id": 2}' >> "$RUNJOB_RESULTS/out.jsonl"; echo "attempt $RUNJOB_ATTEMPT done"
"""
    ctx = lifecycle.open_context()
    try:
        job = BackendContract().job_spec(name, command)
        row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
        watches = [start("watch", row.id, "--interval", "0.3") for _ in range(2)]
        for watch in watches:
            _out, err = watch.communicate(timeout=300)
            assert watch.returncode == 0, err
            assert "Traceback" not in err
        attempts = ctx.store.attempts(row.id)
        assert [(a.n, a.state) for a in attempts] == [(1, "FAILED"), (2, "COMPLETED")]
        assert sorted(comment for _id, comment in scheduler_jobs(ctx, name)) == [f"runjob:{row.id}:1", f"runjob:{row.id}:2"]
        # Each change was recorded once, by the one process that followed the job.
        states = [(e.attempt, e.message) for e in ctx.store.events(row.id, kinds=("state", "resuming", "submitted"))]
        assert len(states) == len(set(states)), states
        # Each attempt ran its own script and wrote its own log.
        transport = ctx.transport(ctx.clusters["under-test"])
        job_dir = attempts[0].submission.job_dir
        assert transport.stat(f"{job_dir}/run.1.sh") and transport.stat(f"{job_dir}/run.2.sh")
        assert b"attempt=1" in transport.read_from(attempts[0].submission.log_path, 0)
        assert b"attempt 2 done" in transport.read_from(attempts[1].submission.log_path, 0)
        collected = lifecycle.collect(ctx, ctx.store.get_job(row.id))
        assert collected.ok
        ids = [json.loads(line)["id"] for line in (Path("results") / name / "out.jsonl").read_text().splitlines()]
        assert ids == [1, 2]
    finally:
        ctx.close()


def test_commands_started_together_share_one_new_ssh_agent(home):
    # A private agent folder: no agent is running for this cluster yet.
    runtime = tempfile.mkdtemp(prefix="rja-", dir="/tmp")
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime, "RUNJOB_SSH_AGENT_IDLE": "5"}
    try:
        checks = [start("clusters", "check", "under-test", env=env) for _ in range(8)]
        for check in checks:
            out, err = check.communicate(timeout=120)
            assert check.returncode == 0, err
            assert "Address already in use" not in out + err
        sockets = list((Path(runtime) / "runjob" / "agents").glob("*.sock"))
        assert len(sockets) == 1
    finally:
        subprocess.run(["rm", "-rf", runtime])


def test_clients_finding_no_agent_at_the_same_instant_share_the_one_started(cluster, monkeypatch):
    # Before the fix this failed about one round in five ("Address already in use", or a
    # second agent): five rounds of six clients each.
    import threading

    from runjob_core.transport import agent as sshagent

    monkeypatch.setenv("RUNJOB_SSH_AGENT_IDLE", "5")
    for _round in range(5):
        runtime = tempfile.mkdtemp(prefix="rjb-", dir="/tmp")
        monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
        clients = [sshagent.AgentTransport(cluster) for _ in range(6)]
        barrier, answers, errors = threading.Barrier(len(clients)), [], []

        def first_call(client):
            barrier.wait()
            try:
                answers.append(client.run(["echo", "ok"]).stdout)
            except Exception as exc:  # noqa: BLE001 - collected and asserted on below
                errors.append(str(exc))

        threads = [threading.Thread(target=first_call, args=(c,)) for c in clients]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            assert errors == [] and answers == ["ok\n"] * len(clients)
            assert len(list((Path(runtime) / "runjob" / "agents").glob("*.sock"))) == 1
        finally:
            for client in clients:
                client.close()
            subprocess.run(["rm", "-rf", runtime])
