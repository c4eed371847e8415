"""Pre-flight's memory estimate uses the job's own engine and flags, shows the breakdown,
and rejects bad values with one line naming the file and key."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

RUNJOB = str(Path(sys.executable).parent / "runjob")


def plan(folder, spec):
    (folder / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    result = subprocess.run([RUNJOB, "plan", f"{spec['name']}.yaml", "--json"], cwd=folder, capture_output=True,
                            text=True, timeout=120)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


GEN = {"name": "gen", "command": "python3 generate.py",
       "model": {"name": "Qwen/Qwen2.5-0.5B-Instruct", "max_model_len": 4096},
       "resources": {"gpus": 1, "gpu_type": "h100"}}


def memory(data):
    [estimate] = [e for e in data["estimates"] if e["source"] == "runjob-core" and "GiB" in e["summary"]]
    return estimate


def test_base_template_defaults_to_hf_and_the_summary_has_the_breakdown(runjob_home):
    result, data = plan(runjob_home, GEN)
    est = memory(data)
    assert est["data"]["engine"] == "hf" and est["data"]["total_gib"] < 3 and est["fits"] is True
    assert "inference (hf)" in est["summary"]
    for part in ("weights", "KV", "activations", "overhead", "of 79.2 GiB per GPU"):
        assert part in est["summary"], est["summary"]


def test_vllm_template_and_engine_key(runjob_home):
    _, data = plan(runjob_home, {**GEN, "name": "v", "template": "vllm",
                                 "params": {"enforce_eager": True, "max_num_batched_tokens": 4096}})
    est = memory(data)
    assert est["data"]["engine"] == "vllm" and est["data"]["total_gib"] > 70  # vLLM reserves its budget
    assert est["data"]["breakdown"]["cuda_graphs_gib"] == 0 and est["data"]["breakdown"]["max_num_batched_tokens"] == 4096
    assert "(pool " in est["summary"]
    _, data = plan(runjob_home, {**GEN, "name": "s", "template": "vllm", "model": {**GEN["model"], "engine": "sglang"},
                                 "params": {"mem_fraction_static": 0.7}})
    assert memory(data)["data"]["breakdown"]["mem_fraction_static"] == 0.7


def test_training_params_reach_the_estimate(runjob_home):
    spec = {"name": "t", "template": "training", "command": "python3 train.py", "model": {"name": "Llama-3.1-8B"},
            "resources": {"gpus": 2, "gpu_type": "a100-80gb"},
            "params": {"method": "full_ft", "zero_stage": 3, "cpu_offload": True, "optimizer": "paged_adamw8bit",
                       "pure_bf16": True, "gradient_checkpointing": True, "seq_len": 4096}}
    _, data = plan(runjob_home, spec)
    est = memory(data)
    s = est["data"]["settings"]
    assert s["cpu_offload"] is True and s["optimizer"] == "paged_adamw8bit" and s["master_weights"] is False
    assert "offloaded to host RAM" in est["summary"] and "optimizer 0.0" in est["summary"]
    lora = {**spec, "name": "l", "params": {"method": "lora", "lora_targets": "q_proj,v_proj", "lora_rank": 8}}
    _, data = plan(runjob_home, lora)
    assert memory(data)["data"]["settings"]["lora_targets"] == ["q_proj", "v_proj"]


def test_unknown_engine_is_one_line_naming_the_key(runjob_home):
    result, _ = plan(runjob_home, {**GEN, "name": "bad", "model": {**GEN["model"], "engine": "tgi"}})
    assert result.returncode != 0
    assert "unknown engine 'tgi' at $.model.engine in bad.yaml" in result.stderr and "Traceback" not in result.stderr


def test_bad_param_names_file_and_key(runjob_home):
    spec = {"name": "b", "template": "training", "command": "python3 train.py", "model": {"name": "Llama-3.1-8B"},
            "resources": {"gpus": 1, "gpu_type": "h100"}, "params": {"zero_stage": "three"}}
    result, data = plan(runjob_home, spec)
    [est] = [e for e in data["estimates"] if e["summary"].startswith("no memory estimate")]
    assert "invalid 'three' at $.params.zero_stage in b.yaml: use an integer >= 0" in est["summary"]
    assert "Traceback" not in result.stderr


def test_model_engine_changes_the_spec_hash_only_when_set():
    from runjob_core import config

    base = {"name": "h", "command": "true", "model": {"name": "Llama-3.1-8B"}}
    plain = config.spec_hash(config.job_from_mapping(base, source="h.yaml", base_dir="/tmp"))
    hf = config.spec_hash(config.job_from_mapping({**base, "model": {"name": "Llama-3.1-8B", "engine": "hf"}},
                                                  source="h.yaml", base_dir="/tmp"))
    assert plain != hf
