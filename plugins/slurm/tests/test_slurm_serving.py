"""The vllm template's model server on the real SLURM cluster, with a stand-in `vllm`
(tests/data/jobs/vllm_standin.py: a stdlib OpenAI-API server with vLLM's log lines) and a
client (tests/data/jobs/vllm_client.py) that the node's own python3 runs.

The stand-in records each server's pid in the job's workdir; the cluster runs on this
machine, so "no server outlives the job" is checked in /proc.
"""

import json
import shutil
import subprocess
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.testing import BackendContract, wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm
JOBS = Path(__file__).resolve().parents[3] / "tests" / "data" / "jobs"
SETUP = ['export PATH="$PWD/bin:$PATH"']


@pytest.fixture
def ctx(runjob_home, slurm_env):
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    work = runjob_home / "project"
    (work / "bin").mkdir(parents=True)
    shutil.copy(JOBS / "vllm_standin.py", work / "bin" / "vllm")
    (work / "bin" / "vllm").chmod(0o755)
    shutil.copy(JOBS / "vllm_client.py", work / "vllm_client.py")
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def submit(ctx, name, command, *, env=None, model=None, **fields):
    job = BackendContract().job_spec(
        name, command, workdir="project", template="vllm", setup=SETUP,
        model={"name": "org/standin-1b", **(model or {})},
        env={"STANDIN_RECORD": "standin", "STANDIN_LOAD_SECONDS": "3", **(env or {})}, **fields,
    )
    return lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))


def transport(ctx):
    return ctx.transport(ctx.clusters["under-test"])


def log_of(ctx, row, n=1):
    return transport(ctx).read_from(ctx.store.attempt(row.id, n).submission.log_path, 0).decode()


def servers(ctx, row):
    """What each server the job started recorded: argv, pid, port."""
    folder = ctx.store.latest_attempt(row.id).submission.job_dir + "/standin"
    return [json.loads(transport(ctx).read_text(f"{folder}/{info.path}")) for info in transport(ctx).listdir_recursive(folder)]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def rows_of(ctx, row):
    submission = ctx.store.latest_attempt(row.id).submission
    text = transport(ctx).read_from(submission.results_dir + "/rows.jsonl", 0).decode()
    return [json.loads(line) for line in text.splitlines()]


def test_serves_the_model_to_the_command_and_stops_it(ctx, runjob_home):
    row, _ = submit(ctx, "serve-ok", "python3 vllm_client.py 6 0 && python3 vllm_client.py 8 0 chat",
                    model={"max_model_len": 8192, "dtype": "bfloat16",
                           "serve_args": ["--gpu-memory-utilization", "0.85", "--chat-template", "a b;$(touch x)"]})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    latest = ctx.store.latest_attempt(row.id)
    log = log_of(ctx, row)
    assert latest.state == "COMPLETED", log
    assert "[runjob] the vLLM server is ready at http://127.0.0.1:" in log
    assert "[vllm] INFO" in log and "Uvicorn running on" in log
    assert "[runjob] stopping the vLLM server" in log
    (server,) = servers(ctx, row)
    argv = server["argv"]
    assert argv[:2] == ["serve", "org/standin-1b"]
    assert argv[argv.index("--served-model-name") + 1] == "org/standin-1b"
    assert argv[argv.index("--max-model-len") + 1] == "8192" and argv[argv.index("--dtype") + 1] == "bfloat16"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "1" and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--chat-template") + 1] == "a b;$(touch x)"  # one argument, never run by a shell
    assert f"client: http://127.0.0.1:{server['port']}/v1 model=org/standin-1b" in log
    assert not alive(server["pid"])
    rows = rows_of(ctx, row)
    assert [r["id"] for r in rows] == list(range(8)) and rows[0]["response"] == "echo: q0"
    collected = lifecycle.collect(ctx, ctx.store.get_job(row.id))
    assert collected.ok, collected.problems
    assert len((runjob_home / collected.dest / "rows.jsonl").read_text().splitlines()) == 8


def test_out_of_memory_while_loading_fails_fast_with_cuda_oom(ctx):
    row, _ = submit(ctx, "serve-oom", "python3 vllm_client.py 5 0", env={"STANDIN_FAIL": "oom"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    job = ctx.store.get_job(row.id)
    log = log_of(ctx, row)
    # Either the health check saw the OOM line first and stopped the job (CANCELLED), or the
    # script saw the server exit first: both long before model.startup_timeout (20 minutes).
    assert ctx.store.latest_attempt(row.id).state in ("FAILED", "CANCELLED"), log
    assert "cuda_oom" in job.outcome, job.outcome
    assert "[vllm] torch.OutOfMemoryError: CUDA out of memory" in log
    assert ("the vLLM server exited with code 1 while loading org/standin-1b" in log
            or "[runjob] SIGTERM: stopping the command and the vLLM server" in log)
    assert "\nclient: " not in log and "did not answer /health" not in log
    assert not any(alive(s["pid"]) for s in servers(ctx, row))


def test_never_healthy_fails_at_the_startup_timeout(ctx):
    row, _ = submit(ctx, "serve-stuck", "python3 vllm_client.py 5 0", env={"STANDIN_FAIL": "never_healthy"},
                    model={"startup_timeout": "20s"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    latest = ctx.store.latest_attempt(row.id)
    log = log_of(ctx, row)
    assert (latest.state, latest.exit_code) == ("FAILED", 124), log
    assert "did not answer /health within model.startup_timeout (20 s)" in log
    assert "[runjob] waiting for the vLLM server to load org/standin-1b" in log
    assert "\nclient: " not in log
    assert not any(alive(s["pid"]) for s in servers(ctx, row))


def test_server_dying_mid_run_fails_the_job_with_its_last_lines(ctx):
    row, _ = submit(ctx, "serve-dies", "python3 vllm_client.py 50 0.2", env={"STANDIN_FAIL": "die_after:3"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    log = log_of(ctx, row)
    # the script ends it, or the health check (EngineDeadError: an uncaught traceback) stops it first
    assert ctx.store.latest_attempt(row.id).state in ("FAILED", "CANCELLED"), log
    assert "the vLLM server exited with code 1 while the command was running" in log
    assert "[runjob] | vllm.v1.engine.exceptions.EngineDeadError" in log
    assert "EngineDeadError" in log
    assert len(rows_of(ctx, row)) == 3
    assert not any(alive(s["pid"]) for s in servers(ctx, row))


def test_cancelled_job_leaves_no_server(ctx):
    row, submission = submit(ctx, "serve-cancel", "python3 vllm_client.py 200 0.5")
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and (ctx.store.latest_attempt(row.id).rows_done or 0) >= 2,
               timeout=120, interval=0.5, what="some rows")
    (server,) = servers(ctx, row)
    assert alive(server["pid"])
    lifecycle.cancel(ctx, ctx.store.get_job(row.id))

    def slurm_done():
        out = subprocess.run(["squeue", "-h", "-j", submission.backend_job_id], capture_output=True, text=True)
        return out.returncode == 0 and not out.stdout.strip()

    wait_until(slurm_done, timeout=120, interval=0.5, what="SLURM to end the job")
    wait_until(lambda: not alive(server["pid"]), timeout=30, interval=0.5, what="the server to be gone")


def test_time_limited_serving_job_is_resumed_and_skips_rows_written(ctx):
    row, _ = submit(ctx, "serve-resume", "python3 vllm_client.py 110 1", resources={"time": "1"})
    monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=3.0)
    attempts = ctx.store.attempts(row.id)
    assert attempts[0].state == "TIMEOUT" and attempts[-1].state == "COMPLETED", [a.state for a in attempts]
    ids = [r["id"] for r in rows_of(ctx, row)]
    assert sorted(ids) == list(range(110))
    second = log_of(ctx, row, 2)
    done_before = int(second.split("already done: ", 1)[1].split()[0])
    assert 0 < done_before < 110
    assert not any(alive(s["pid"]) for s in servers(ctx, row))
    assert len(servers(ctx, row)) == len(attempts)


def test_two_serving_jobs_on_one_node_each_talk_to_their_own_server(ctx):
    rows_a, _ = submit(ctx, "serve-a", "python3 vllm_client.py 10 0.3", model={"name": "org/model-a"})
    rows_b, _ = submit(ctx, "serve-b", "python3 vllm_client.py 10 0.3", model={"name": "org/model-b"})
    monitor.watch(ctx, [rows_a.id, rows_b.id], min_interval=1.0, max_interval=2.0)
    (a,), (b,) = servers(ctx, rows_a), servers(ctx, rows_b)
    assert a["port"] != b["port"]
    for row, name in ((rows_a, "org/model-a"), (rows_b, "org/model-b")):
        log = log_of(ctx, row)
        assert ctx.store.latest_attempt(row.id).state == "COMPLETED", log
        assert f"models: ['{name}']" in log


class _OtherServer(BaseHTTPRequestHandler):
    """Another job's vLLM on the port this job is given: healthy, but /v1 wants its own key."""

    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_port_taken_by_another_server_is_detected_and_another_one_used(ctx, runjob_home):
    other = ThreadingHTTPServer(("127.0.0.1", 0), _OtherServer)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = other.server_address[1]
    # The job's free-port choice (python3 -c '...getsockname...') hands out the taken port once.
    shim = runjob_home / "project" / "bin" / "python3"
    shim.write_text(textwrap.dedent("""\
        #!/bin/bash
        if [ "$1" = -c ] && [[ "$2" == *getsockname* ]] && [ ! -e "$RUNJOB_JOB_DIR/port-handed" ]; then
          touch "$RUNJOB_JOB_DIR/port-handed"; echo "$STANDIN_TAKEN_PORT"; exit 0
        fi
        exec /usr/bin/python3 "$@"
        """))
    shim.chmod(0o755)
    try:
        row, _ = submit(ctx, "serve-taken", "python3 vllm_client.py 3 0", env={"STANDIN_TAKEN_PORT": str(taken)})
        monitor.watch(ctx, [row.id], min_interval=1.0, max_interval=2.0)
    finally:
        other.shutdown()
    log = log_of(ctx, row)
    assert ctx.store.latest_attempt(row.id).state == "COMPLETED", log
    assert f"[runjob] port {taken} was taken by another process; starting the server on another port" in log
    first, second = sorted(servers(ctx, row), key=lambda s: s["port"] != taken)
    assert first["port"] == taken and second["port"] != taken
    assert f"client: http://127.0.0.1:{second['port']}/v1" in log
    assert len(rows_of(ctx, row)) == 3
