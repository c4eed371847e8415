"""The ``estimate`` click command, invoked directly."""

from __future__ import annotations

import json

from click.testing import CliRunner

from runjob_core.cli.estimate import command
from runjob_core.errors import RunjobError

REQUIRED = {
    "model", "kind", "gpu", "dtype", "params_total", "weights_gib", "kv_bytes_per_token",
    "kv_cache_gib", "kv_capacity_tokens", "optimizer_gib", "gradients_gib", "activations_gib",
    "overhead_gib", "total_gib", "gpu_vram_gib", "fits", "headroom_gib", "suggestions",
}


def _run(*args):
    return CliRunner().invoke(command, list(args))


def test_json_has_required_keys_and_is_one_object():
    r = _run("--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "H100", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert REQUIRED <= set(data)
    assert data["fits"] is True and data["suggestions"] == []
    assert data["kv_bytes_per_token"] == 131072
    assert r.output.strip().count("\n") == 0


def test_json_training_options():
    r = _run("--model", "qwen2.5-7b", "--kind", "full_ft", "--gpu", "a100-80gb", "--num-gpus", "8",
             "--zero-stage", "3", "--grad-checkpointing", "--seq-len", "4096", "--batch", "2", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kind"] == "full_ft" and d["num_gpus"] == 8
    assert d["settings"]["zero_stage"] == 3 and d["settings"]["grad_checkpointing"] is True
    assert d["optimizer_gib"] > 0 and d["gradients_gib"] > 0


def test_does_not_fit_still_exits_zero_with_suggestions():
    r = _run("--model", "meta-llama/Llama-3.1-70B-Instruct", "--kind", "inference", "--gpu", "A100-40GB",
             "--max-model-len", "8192", "--json")
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["fits"] is False and d["suggestions"]


def test_readable_output_has_table_verdict_and_suggestions():
    r = _run("--model", "Llama-3.1-70B", "--kind", "inference", "--gpu", "A100-40GB", "--max-model-len", "8192")
    assert r.exit_code == 0
    assert "weights" in r.output and "total (peak)" in r.output
    assert "does not fit" in r.output and "suggestion:" in r.output and "tp=4" in r.output
    r = _run("--model", "Qwen2.5-0.5B", "--kind", "lora", "--gpu", "T4")
    assert r.exit_code == 0 and "fits" in r.output and "headroom" in r.output


def test_unknown_model_is_a_runjob_error():
    r = _run("--model", "Llama-3.1-9000B", "--kind", "inference", "--gpu", "H100", "--json")
    assert r.exit_code == 1
    assert isinstance(r.exception, RunjobError)
    msg = str(r.exception)
    assert "Llama-3.1-9000B" in msg and "Hugging Face cache" in msg and "Llama-3.1" in msg


def test_unknown_gpu_is_a_runjob_error():
    r = _run("--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "P100")  # a Pascal card is not in the table
    assert r.exit_code == 1 and isinstance(r.exception, RunjobError)
    assert "unknown GPU" in str(r.exception)


def test_bad_choice_is_a_usage_error():
    r = _run("--model", "Llama-3.1-8B", "--kind", "pretrain", "--gpu", "H100")
    assert r.exit_code == 2


def test_module_import_is_light():
    import subprocess
    import sys

    code = ("import sys, runjob_core.cli.estimate as m; "
            "print(any(k.startswith('runjob_core.estimator') for k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


NEW = {"engine", "reserved_gib", "offloaded_gib", "paged_gib"}


def test_json_keeps_its_fields_and_adds_the_new_components():
    r = _run("--model", "Qwen2.5-0.5B", "--kind", "inference", "--gpu", "H100", "--engine", "hf",
             "--max-model-len", "4096", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert REQUIRED | NEW <= set(d)
    assert d["engine"] == "hf" and d["total_gib"] < 3 and d["settings"]["engine"] == "hf"
    r = _run("--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "RTX-4090", "--enforce-eager",
             "--max-num-batched-tokens", "4096", "--json")
    d = json.loads(r.output)
    assert d["breakdown"]["cuda_graphs_gib"] == 0 and d["breakdown"]["max_num_batched_tokens"] == 4096
    r = _run("--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "H100", "--engine", "sglang",
             "--mem-fraction-static", "0.8", "--json")
    assert json.loads(r.output)["breakdown"]["mem_fraction_static"] == 0.8


def test_training_flags_reach_the_estimate():
    r = _run("--model", "Llama-3.1-8B", "--kind", "full_ft", "--gpu", "a100-80gb", "--optimizer", "paged_adamw8bit",
             "--pure-bf16", "--cpu-offload", "--zero-stage", "3", "--num-gpus", "2", "--json")
    d = json.loads(r.output)
    assert d["settings"]["optimizer"] == "paged_adamw8bit" and d["settings"]["master_weights"] is False
    assert d["settings"]["cpu_offload"] is True and d["weights_gib"] == 0 and d["offloaded_gib"] > 20
    r = _run("--model", "Llama-3.1-8B", "--kind", "lora", "--gpu", "h100", "--lora-targets", "q_proj, v_proj",
             "--lora-rank", "8", "--json")
    d = json.loads(r.output)
    assert d["settings"]["lora_targets"] == ["q_proj", "v_proj"] and d["params_trainable"] == 8 * 32 * (4096 + 4096 + 4096 + 1024)


def test_readable_output_names_the_engine_and_offload():
    r = _run("--model", "Llama-3.1-8B", "--kind", "inference", "--gpu", "H100", "--engine", "sglang")
    assert r.exit_code == 0 and "(sglang)" in r.output and "SGLang static pool" in r.output
    r = _run("--model", "Llama-3.1-8B", "--kind", "full_ft", "--gpu", "H100", "--cpu-offload")
    assert "offloaded to host" in r.output
