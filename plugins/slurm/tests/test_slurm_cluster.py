"""The SLURM backend against the real local cluster, over SSH as the test user.

The cluster comes from scripts/test-cluster.sh (the README's test command starts it).
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import attrs
import pytest
import yaml

from runjob_core import lifecycle, monitor
from runjob_core.errors import BackendError
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm


@pytest.fixture
def cluster(slurm_env):
    return slurm_cluster_config(slurm_env)


class TestSlurmContract(BackendContract):
    __test__ = True
    backend = "slurm"
    time_limit = "1"  # SLURM counts in minutes
    time_limit_grace = 180.0


@pytest.fixture
def ctx(runjob_home, cluster):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
    context = lifecycle.open_context()
    yield context
    active = {a.job_id for a in context.store.active_attempts()}
    for job_id in active:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def spec(name, command, **fields):
    return BackendContract().job_spec(name, command, **fields)


def submit(ctx, job):
    return lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))


def wait_end(ctx, job_id, timeout=180):
    return BackendContract()._wait_terminal(ctx, job_id, timeout=timeout)


def transport(ctx):
    return ctx.transport(ctx.clusters["under-test"])


def test_gpu_job_gets_typed_gres_and_a_device(ctx):
    job = spec("gpu-job", "echo CUDA=$CUDA_VISIBLE_DEVICES", resources={"partition": "gpu", "gpus": 1, "time": "5"})
    row, submission = submit(ctx, job)
    assert "#SBATCH --gres=gpu:h100:1" in ctx.store.get_job(row.id).script
    assert "#SBATCH --partition=gpu" in ctx.store.get_job(row.id).script
    assert wait_end(ctx, row.id).state == "COMPLETED"
    assert b"CUDA=0" in transport(ctx).read_from(submission.log_path, 0)


def test_generic_gres_format(ctx, cluster):
    under_test = ctx.clusters["under-test"]
    ctx.clusters["under-test"] = attrs.evolve(under_test, options=attrs.evolve(under_test.options, gres_format="generic"))
    job = spec("gpu-generic", "true", resources={"partition": "gpu", "gpus": 2})
    rendered = lifecycle.render_preview(ctx, job, ctx.clusters["under-test"])
    assert "#SBATCH --gres=gpu:2" in rendered.script


def test_partition_down_pends_with_its_reason(ctx):
    row, _ = submit(ctx, spec("down-part", "true", resources={"partition": "maint"}))
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and ctx.store.latest_attempt(row.id).reason, what="a pending reason")
    attempt = ctx.store.latest_attempt(row.id)
    assert attempt.state == "PENDING" and "PartitionDown" in attempt.reason and "maint" in attempt.reason


def test_bad_partition_is_diagnosed_and_nothing_is_left_submitted(ctx):
    with pytest.raises(BackendError) as caught:
        submit(ctx, spec("bad-part", "true", resources={"partition": "gpux"}))
    message = str(caught.value)
    assert "gpux" in message and "debug" in message and "gpu" in message
    [row] = ctx.store.list_jobs()
    assert ctx.store.attempts(row.id) == [] and row.state == "REJECTED"


def test_bogus_account_is_diagnosed(ctx):
    with pytest.raises(BackendError) as caught:
        submit(ctx, spec("bad-account", "true", resources={"account": "bogus"}))
    message = str(caught.value)
    assert "bogus" in message and "research" in message


def test_time_limit_gives_timeout_and_the_log_says_so(ctx):
    row, submission = submit(ctx, spec("too-long", "sleep 600", resources={"time": "1"}, resume={"auto": False}))
    final = wait_end(ctx, row.id, timeout=240)
    assert final.state == "TIMEOUT"
    assert b"DUE TO TIME LIMIT" in transport(ctx).read_from(submission.log_path, 0)


HOG = "python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'"


def poll_until_ended(ctx, submission, timeout=120):
    return TestSlurmContract()._poll_until_terminal(ctx, submission, timeout=timeout)


def test_memory_limit_gives_out_of_memory_reported_not_retried_smaller(ctx):
    # A real cgroup OOM kill (the test cluster enforces --mem). The host_oom finding may stop
    # the job while SLURM is still ending it; either way the state is SLURM's: OUT_OF_MEMORY.
    row, submission = submit(ctx, spec("hog", HOG, resources={"mem": "64M"}, params={"batch_size": 64}))
    final = wait_end(ctx, row.id, timeout=180)
    assert final.state == "OUT_OF_MEMORY", [e.message for e in ctx.store.events(row.id)]
    findings = [e for e in ctx.store.events(row.id, kinds=("finding",)) if e.data.get("label") == "host_oom"]
    assert findings and "--mem" in findings[0].message  # the fix is suggested
    [state_event] = [e.message for e in ctx.store.events(row.id, kinds=("state",)) if "OUT_OF_MEMORY" in e.message]
    assert "exit code" not in state_event  # SLURM's 0:125 is not a success
    assert ctx.store.latest_attempt(row.id).n == 1
    assert json.loads(ctx.store.get_job(row.id).spec_json)["params"] == {"batch_size": 64}
    assert poll_until_ended(ctx, submission).state == "OUT_OF_MEMORY"  # the backend alone agrees


def test_twenty_jobs_one_squeue_per_cycle(ctx):
    rows = [submit(ctx, spec(f"many-{i}", "sleep 20"))[0] for i in range(20)]
    ssh = transport(ctx)
    ids = [r.id for r in rows]

    def programs_of_one_cycle():
        before = len(ssh.commands)
        monitor.cycle(ctx, ids)
        return [next(word for word in c.split() if "=" not in word and word != "env") for c in ssh.commands[before:]]

    wait_until(lambda: monitor.cycle(ctx, ids) and all(ctx.store.latest_attempt(i).state == "RUNNING" for i in ids),
               what="all 20 running")
    # The health plugin's disk check adds one df per cluster every 5 minutes, not per job.
    assert programs_of_one_cycle() in (["squeue"], ["squeue", "df"])
    assert programs_of_one_cycle() == ["squeue"]


def sshd_pids_serving(server_port: int, client_port: int) -> list[int]:
    """Processes holding the server end of the TCP connection 127.0.0.1:client_port ->
    server_port, found through /proc (no ss/lsof needed)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                inodes.add(f"socket:[{inode}]")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                pids.append(int(entry.name))
        except OSError:  # the process ended, or is not ours to look at
            continue
    return pids


def test_connection_killed_mid_watch_reconnects(ctx, slurm_env):
    row, _ = submit(ctx, spec("survivor", "for i in $(seq 1 10); do echo tick $i; sleep 1; done"))
    ssh = transport(ctx)
    monitor.cycle(ctx, [row.id])
    connects = ssh.connects
    # Kill the sshd processes serving this connection only (other test workers have theirs).
    our_port = ssh._connect().get_transport().sock.getsockname()[1]
    pids = sshd_pids_serving(int(slurm_env["RUNJOB_TEST_SSH_PORT"]), our_port)
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    final = wait_end(ctx, row.id)
    assert final.state == "COMPLETED" and ssh.connects > connects


def test_output_written_after_the_exit_status_is_not_lost(ctx):
    # sshd sends the shell's exit status while a child it left behind still writes.
    result = transport(ctx).run_shell("(sleep 0.3; echo late; echo late-err >&2) & echo early")
    assert (result.returncode, result.stdout, result.stderr) == (0, "early\nlate\n", "late-err\n")


def test_killed_runjob_run_reattaches_to_its_slurm_job(runjob_home, cluster):
    # `runjob run` SIGKILLed while it watches; run again, it finds the job by its tag.
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
    command = """for i in $(seq 1 15); do echo step $i; sleep 1; done
mkdir -p $RUNJOB_RESULTS && echo '{"id": 1}' > $RUNJOB_RESULTS/out.jsonl"""
    (runjob_home / "slow.yaml").write_text(yaml.safe_dump({"name": "slow", "cluster": "under-test", "command": command}))
    runjob = str(Path(os.sys.executable).parent / "runjob")

    def cli(*args):
        return subprocess.run([runjob, *args], capture_output=True, text=True, timeout=300)

    said = runjob_home / "first-run.stderr"
    with open(said, "w") as stderr:
        first = subprocess.Popen([runjob, "run", "slow.yaml", "--yes"], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        try:
            wait_until(lambda: "step 2" in cli("logs", "slow").stdout, timeout=300, what="the job to run")
        except AssertionError as exc:  # once seen on CI, not reproduced: say what the first run and the store saw
            raise AssertionError(f"{exc}\nthe first `runjob run` said:\n{said.read_text()}\n`runjob logs slow`: "
                                 f"{cli('logs', 'slow').stderr}\nevents:\n{cli('events').stdout}") from None
    finally:
        first.kill()
        first.wait()
    [before] = json.loads(cli("status", "slow", "--json").stdout)
    again = cli("run", "slow.yaml", "--yes")
    assert again.returncode == 0, again.stderr
    assert "already submitted" in again.stderr
    [after] = json.loads(cli("status", "slow", "--json").stdout)
    assert after["state"] == "COMPLETED" and len(after["attempts"]) == 1
    assert after["attempts"][0]["backend_job_id"] == before["attempts"][0]["backend_job_id"]


def test_hostile_values_run_nothing_on_the_cluster(ctx, tmp_path):
    marker = f"/tmp/runjob-pwned-{os.getpid()}"
    job = spec("hostile", 'echo "$GREETING"', env={"GREETING": f"x; touch {marker}; $(touch {marker})"})
    row, submission = submit(ctx, job)
    assert wait_end(ctx, row.id).state == "COMPLETED"
    assert not Path(marker).exists()
    assert f"x; touch {marker}".encode() in transport(ctx).read_from(submission.log_path, 0)


def test_logs_are_read_incrementally_and_results_collected(ctx):
    command = ("mkdir -p $RUNJOB_RESULTS; for i in $(seq 1 5); do echo line $i; "
               "echo \"{\\\"id\\\": $i}\" >> $RUNJOB_RESULTS/out.jsonl; sleep 0.5; done")
    row, submission = submit(ctx, spec("incremental", command))
    wait_end(ctx, row.id)
    size = transport(ctx).stat(submission.log_path).size
    assert ctx.store.offset(row.id, 1) == size
    collected = lifecycle.collect(ctx, ctx.store.get_job(row.id))
    assert collected.ok and collected.artifacts[0].rows == 5
    assert len((Path("results") / "incremental" / "out.jsonl").read_text().splitlines()) == 5


def test_workdir_sync_uploads_only_changes_and_honours_gitignore(ctx, runjob_home):
    work = runjob_home / "project"
    work.mkdir()
    (work / "train.py").write_text("print('training')\n")
    (work / ".gitignore").write_text("data/\n*.ckpt\n")
    (work / "data").mkdir()
    (work / "data" / "big.bin").write_bytes(b"x" * 1000)
    (work / "model.ckpt").write_bytes(b"y" * 1000)
    job = spec("synced", "python3 train.py", workdir="project")
    row, submission = submit(ctx, job)
    assert wait_end(ctx, row.id).state == "COMPLETED"
    assert b"training" in transport(ctx).read_from(submission.log_path, 0)
    remote = {f.path for f in transport(ctx).listdir_recursive(submission.workdir)}
    assert remote == {"train.py", ".gitignore"}
    from runjob_core.staging import sync_workdir

    assert sync_workdir(transport(ctx), work, submission.workdir) == []
    (work / "train.py").write_text("print('training v2')\n")
    assert sync_workdir(transport(ctx), work, submission.workdir) == ["train.py"]


def test_clusters_check_rows(runjob_home, cluster, runjob_cli):
    good = attrs.evolve(cluster, name="good")
    bad = attrs.evolve(cluster, name="bad", options=attrs.evolve(cluster.options, default_partition="nope"))
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [good, bad])
    result = subprocess.run([str(Path(os.sys.executable).parent / "runjob"), "clusters", "check", "good", "--json"],
                            capture_output=True, text=True)
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["ok"], data
    assert {r["check"] for r in data["checks"]} >= {"connect", "whoami", "squeue -u $USER", "partition", "scratch writable",
                                                    "free disk on scratch", "account"}
    result = subprocess.run([str(Path(os.sys.executable).parent / "runjob"), "clusters", "check", "bad", "--json"],
                            capture_output=True, text=True)
    rows = {r["check"]: r for r in json.loads(result.stdout)["checks"]}
    assert result.returncode == 1 and not rows["partition"]["ok"] and "debug" in rows["partition"]["fix"]


def test_unknown_host_key_is_refused(runjob_home, cluster, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    from runjob_core.errors import TransportError
    from runjob_core.transport.ssh import SSHTransport

    with pytest.raises(TransportError, match="not in known_hosts"):
        SSHTransport(attrs.evolve(cluster, known_hosts=str(empty))).run(["true"])


def test_a_changed_host_key_is_refused_as_a_mismatch(runjob_home, cluster, tmp_path):
    """known_hosts names the test sshd with another key: HostKeyMismatch, no retry, the advice given."""
    import paramiko

    from runjob_core.errors import HostKeyMismatch
    from runjob_core.transport.ssh import SSHTransport

    recorded = Path(cluster.known_hosts).read_text().split()
    other = paramiko.RSAKey.generate(2048)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{recorded[0]} {other.get_name()} {other.get_base64()}\n")
    transport = SSHTransport(attrs.evolve(cluster, known_hosts=str(wrong)), host_key_advice="ask the admins")
    with pytest.raises(HostKeyMismatch) as raised:
        transport.run(["true"])
    assert (raised.value.host, raised.value.port, raised.value.known_hosts) == (cluster.host, cluster.port, str(wrong))
    assert str(raised.value).endswith("it changed or someone is in the way; ask the admins")
    assert transport.connects <= 1


def test_plan_refuses_time_over_the_partition_limit(runjob_home, cluster):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [attrs.evolve(cluster, name="under-test")])
    (runjob_home / "long.yaml").write_text("name: long\ncluster: under-test\ncommand: 'true'\n"
                                           "resources: {partition: gpu, time: '2:00:00'}\n")
    result = subprocess.run([str(Path(os.sys.executable).parent / "runjob"), "plan", "long.yaml", "--json"],
                            cwd=runjob_home, capture_output=True, text=True)
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["refused"]
    assert any("over partition 'gpu'" in p and "01:00:00" in p and "debug" in p for p in data["problems"])


def test_measured_memory_is_recorded_next_to_the_estimate_and_shown_by_estimate(ctx, runjob_cli):
    # a job whose log reports its GPU peak the way a training/generate script prints it, and
    # which holds ~300 MB of host memory long enough for jobacct_gather (1 s) to see it
    command = ("python3 -c \"import time; x = bytearray(300 << 20); time.sleep(3)\"; "
               "echo 'peak: torch.cuda.max_memory_allocated() = 12.5 GiB'")
    job = spec("measured", command, model={"name": "Llama-3.1-8B", "max_model_len": 4096},
               resources={"partition": "gpu", "gpus": 1, "gpu_type": "h100", "time": "5"})
    row, _submission = submit(ctx, job)
    assert wait_end(ctx, row.id).state == "COMPLETED"
    lifecycle.collect(ctx, ctx.store.get_job(row.id))
    [memory] = [a for a in ctx.store.artifacts(row.id) if a.kind == "memory"]
    assert memory.data["gpu_peak_gib"] == 12.5 and memory.data["gpu_peak_from"] == "torch.cuda.max_memory_allocated"
    assert memory.data["engine"] == "hf" and 15 < memory.data["estimate_total_gib"] < 20  # 8B bf16 weights + KV
    assert memory.data["max_rss_gib"] > 0.25  # sacct MaxRSS of the batch step
    assert "GPU peak 12.5 GiB" in memory.location and "estimate" in memory.location and "MaxRSS" in memory.location
    from runjob_core.reporting import report
    shown = report.build_report(ctx.store, ctx.store.get_job(row.id))["artifacts"]
    assert any(a["kind"] == "memory" and a["location"] == memory.location for a in shown)  # the report shows both
    result = runjob_cli("estimate", "--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "h100",
                        "--engine", "hf", "--max-model-len", "4096")
    assert result.exit_code == 0, result.output
    assert f"measured on this cluster: 12.5 GiB GPU peak (torch.cuda.max_memory_allocated) by job {row.id}" in result.output
    other = runjob_cli("estimate", "--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "h100",
                       "--engine", "hf", "--max-model-len", "8192")
    assert other.exit_code == 0 and "measured on this cluster" not in other.output  # other settings: no match
