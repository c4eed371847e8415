"""The vLLM server's failure lines, as the serving template puts them in the job log (with the
"[vllm] " prefix), get the health labels the monitor acts on. The excerpts in
tests/data/vllm_server_logs/ follow the messages of vLLM's source (engine core start-up, KV
cache check, EngineDeadError, a TP worker's NCCL error); the OOM one is what the test
stand-in prints (tests/data/jobs/vllm_standin.py)."""

import json
from pathlib import Path

import pytest

LOGS = Path(__file__).parent / "data" / "vllm_server_logs"


@pytest.mark.parametrize(("name", "label", "action"), [
    ("oom_while_loading.log", "cuda_oom", "stop"),
    ("max_seq_len_above_kv_cache.log", "cuda_oom", "stop"),
    ("kv_cache_too_small_at_start.log", "cuda_oom", "stop"),
    ("engine_dead_mid_run.log", "traceback", "stop"),
    ("nccl_error_under_tp.log", "nccl_error", "retry"),
])
def test_server_failure_lines_are_labelled(runjob_cli, name, label, action):
    result = runjob_cli("health", "scan", str(LOGS / name), "--json")
    (report,) = json.loads(result.output)
    assert (report["findings"][0]["label"], report["findings"][0]["action"]) == (label, action), report
