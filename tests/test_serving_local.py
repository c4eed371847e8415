"""The vllm template's server on the local backend (the job runs on this machine in its own
process group): served and stopped at the end, and stopped when the job is cancelled."""

import json
import shutil
from pathlib import Path

import pytest

from runjob_core import lifecycle, monitor
from runjob_core.config import job_from_mapping
from runjob_core.testing import wait_until

JOBS = Path(__file__).parent / "data" / "jobs"


@pytest.fixture
def ctx(runjob_home):
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


def submit(ctx, name, command):
    job = job_from_mapping({"name": name, "command": command, "template": "vllm", "workdir": "project",
                            "setup": ['export PATH="$PWD/bin:$PATH"'], "model": {"name": "org/standin-1b"},
                            "env": {"STANDIN_RECORD": "standin", "STANDIN_LOAD_SECONDS": "1"}},
                           source=f"{name}.yaml", base_dir=str(Path.cwd()))
    return lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))


def servers(submission):
    folder = Path(submission.job_dir) / "standin"
    return [json.loads(p.read_text()) for p in folder.glob("*.json")] if folder.is_dir() else []


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_local_job_is_served_and_the_server_stopped(ctx):
    row, submission = submit(ctx, "local-serve", "python3 vllm_client.py 4 0")
    monitor.watch(ctx, [row.id], min_interval=0.2, max_interval=0.5)
    log = Path(submission.log_path).read_text()
    assert ctx.store.latest_attempt(row.id).state == "COMPLETED", log
    assert "[runjob] the vLLM server is ready at http://127.0.0.1:" in log and "all rows written" in log
    (server,) = servers(submission)
    assert not alive(server["pid"])


def test_local_cancel_stops_the_server(ctx):
    row, submission = submit(ctx, "local-cancel", "python3 vllm_client.py 500 0.5")
    wait_until(lambda: monitor.cycle(ctx, [row.id]) and (ctx.store.latest_attempt(row.id).rows_done or 0) >= 1,
               timeout=60, interval=0.2, what="a row")
    (server,) = servers(submission)
    assert alive(server["pid"])
    lifecycle.cancel(ctx, ctx.store.get_job(row.id))
    wait_until(lambda: not alive(server["pid"]), timeout=30, interval=0.2, what="the server to be gone")
    assert "[runjob] SIGTERM: stopping the command and the vLLM server" in Path(submission.log_path).read_text()


def render(ctx, **fields):
    job = job_from_mapping({"name": "r", "command": "python3 gen.py", "template": "vllm", **fields}, source="r.yaml")
    return lifecycle.render_preview(ctx, job, ctx.clusters["local"]).script


def test_rendered_server_command_quotes_every_value_and_uses_every_gpu(ctx):
    script = render(ctx, model={"name": "org/m; rm -rf ~", "path": "/models/my model", "max_model_len": 32768,
                                "dtype": "bfloat16", "serve_args": ["--chat-template", "$(id)"], "startup_timeout": "1h"},
                    resources={"gpus": 4})
    assert "runjob_vllm_args=(serve '/models/my model' --served-model-name \"$RUNJOB_MODEL\"" in script
    assert "export RUNJOB_MODEL='org/m; rm -rf ~'" in script
    assert "--tensor-parallel-size 4" in script and "--max-model-len 32768" in script and "--dtype bfloat16" in script
    assert "  --chat-template\n  '$(id)'\n)" in script
    assert "runjob_vllm_timeout=3600" in script


def test_serve_false_keeps_offline_mode(ctx):
    script = render(ctx, model={"name": "org/m", "serve": False, "max_model_len": 8192})
    assert "vllm serve" not in script and "runjob_vllm" not in script
    assert "export RUNJOB_MAX_MODEL_LEN=8192" in script and "\npython3 gen.py\n" in script
