"""Model-aware pre-flight (runjob_core.defaults.model_length): real config.json files of Llama 3.1 and
Qwen2.5 (tests/data/model_configs/SOURCES.md) read from model.path; the Hub path is in
tests/hub/test_hub_model_length.py, the job side in the SLURM serving tests."""

import json
import shutil
from pathlib import Path

import pytest

from runjob_core import lifecycle
from runjob_core.defaults.model_config import max_context
from runjob_core.config import job_from_mapping
from runjob_core.errors import ConfigError
from runjob_core.defaults.model_length import RULE

CONFIGS = Path(__file__).parent / "data" / "model_configs"
LLAMA = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B" / "config.json").read_text())
QWEN = json.loads((CONFIGS / "Qwen--Qwen2.5-7B" / "config.json").read_text())


def test_max_context_of_real_configs():
    assert max_context(LLAMA) == (131072, "max_position_embeddings 131072")  # llama3 rope is already counted
    assert max_context(QWEN) == (131072, "max_position_embeddings 131072")


def test_max_context_rope_scaling_and_fallbacks():
    # Qwen2.5-Instruct's documented YaRN setting on a 32768-token config: 4 x 32768
    yarn = {**QWEN, "max_position_embeddings": 32768,
            "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert max_context(yarn) == (131072, "original_max_position_embeddings 32768 x rope_scaling yarn factor 4")
    linear = {**QWEN, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert max_context(linear)[0] == 8192
    # the smallest length key wins, as in vLLM
    assert max_context({**LLAMA, "seq_length": 8192})[0] == 8192
    # multimodal configs keep it under text_config
    assert max_context({"model_type": "x", "text_config": QWEN})[0] == 131072
    # generation_config.json max_length only where config.json names no length
    assert max_context({"model_type": "x"}, {"max_length": 2048}) == (2048, "max_length 2048 in generation_config.json")
    assert max_context(QWEN, {"max_length": 2048})[0] == 131072
    assert max_context({"model_type": "x"}) is None


@pytest.fixture
def ctx(runjob_home):
    context = lifecycle.open_context()
    yield context
    context.close()


def model_dir(tmp_path, name="meta-llama--Llama-3.1-8B", generation=None):
    folder = tmp_path / "models" / name
    shutil.copytree(CONFIGS / name, folder)
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def check(ctx, **model):
    job = job_from_mapping({"name": "gen", "command": "python3 gen.py", "template": "vllm", "model": model},
                           source="gen.yaml")
    return lifecycle.preflight(ctx, job, ctx.clusters["local"])


def ours(checks):
    return [e for e in checks.estimates if "model" in e.data and "supported" in e.data or "not checked" in e.summary]


def test_truncating_max_tokens_is_refused_with_the_rule(ctx, tmp_path):
    checks = check(ctx, path=str(model_dir(tmp_path)), max_tokens=4096)
    assert checks.refused
    (problem,) = checks.problems
    assert "model.max_tokens 4096 is below the 131072 tokens" in problem and f'"{RULE}"' in problem
    assert "max_tokens_reason" in problem and "--force" in problem


def test_short_max_model_len_is_refused_too(ctx, tmp_path):
    checks = check(ctx, path=str(model_dir(tmp_path, "Qwen--Qwen2.5-7B")), max_model_len=32768)
    (problem,) = checks.problems
    assert "model.max_model_len 32768 is below the 131072 tokens" in problem and RULE in problem


def test_max_model_len_above_the_model_is_an_error_naming_both(ctx, tmp_path):
    checks = check(ctx, path=str(model_dir(tmp_path)), max_model_len=262144, max_tokens_reason="long docs")
    (problem,) = checks.problems
    assert "model.max_model_len 262144 is above the 131072 tokens" in problem
    assert "max_position_embeddings 131072" in problem


def test_a_stated_reason_is_accepted_and_shown(ctx, tmp_path):
    checks = check(ctx, path=str(model_dir(tmp_path)), max_tokens=4096, max_model_len=8192,
                   max_tokens_reason="the benchmark's answers are one number; 8192 fits 4 replicas")
    assert not checks.refused
    (estimate,) = ours(checks)
    assert estimate.fits is None
    assert "supports 131072 tokens" in estimate.summary and "max_model_len 8192, max_tokens 4096" in estimate.summary
    assert "shorter on purpose: the benchmark's answers" in estimate.summary


def test_full_length_passes_and_names_where_it_was_read(ctx, tmp_path):
    folder = model_dir(tmp_path)
    checks = check(ctx, path=str(folder), name="meta-llama/Llama-3.1-8B")
    assert not checks.refused
    (estimate,) = ours(checks)
    assert f"{folder}/config.json" in estimate.summary and "unset (vLLM uses 131072)" in estimate.summary
    assert check(ctx, path=str(folder), max_tokens=131072).problems == ()


def test_generation_config_length_when_config_has_none(ctx, tmp_path):
    folder = model_dir(tmp_path, generation={"max_length": 16384})
    config = json.loads((folder / "config.json").read_text())
    del config["max_position_embeddings"]
    (folder / "config.json").write_text(json.dumps(config))
    (problem,) = check(ctx, path=str(folder), max_tokens=8192).problems
    assert "is below the 16384 tokens" in problem and "max_length 16384 in generation_config.json" in problem


def test_unreadable_model_is_a_warning_not_a_crash(ctx, tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    checks = check(ctx, path=str(broken), max_tokens=10)
    assert not checks.refused
    (estimate,) = ours(checks)
    assert estimate.summary.startswith("warning: the model's maximum length was not checked:")
    assert "is not valid JSON" in estimate.summary


def test_memory_estimate_uses_the_full_length(ctx, tmp_path):
    folder = model_dir(tmp_path)
    job = job_from_mapping({"name": "gen", "command": "x", "template": "vllm", "model": {"path": str(folder)},
                            "resources": {"gpus": 1, "gpu_type": "h100"}}, source="gen.yaml")
    memory = [e for e in lifecycle.preflight(ctx, job, ctx.clusters["local"]).estimates if "total_gib" in e.data]
    short = job_from_mapping({"name": "gen", "command": "x", "template": "vllm",
                              "model": {"path": str(folder), "max_model_len": 4096, "max_tokens_reason": "test"},
                              "resources": {"gpus": 1, "gpu_type": "h100"}}, source="gen.yaml")
    memory_short = [e for e in lifecycle.preflight(ctx, short, ctx.clusters["local"]).estimates if "total_gib" in e.data]
    assert memory[0].data["max_model_len"] == 131072 and memory_short[0].data["max_model_len"] == 4096


@pytest.mark.parametrize(("model", "message"), [
    ({"name": "m", "max_tokens": 0}, "invalid length 0 at $.model.max_tokens"),
    ({"name": "m", "max_tokens": 9000, "max_model_len": 8192}, "model.max_tokens 9000 is above model.max_model_len 8192"),
    ({"name": "m", "max_tokens_reason": " "}, "empty model.max_tokens_reason"),
    ({"name": "m", "serve_args": ["--port=9"]}, "--port at $.model.serve_args[0] in job.yaml is set by runjob"),
    ({"name": "m", "startup_timeout": "soon"}, "invalid duration 'soon' at $.model.startup_timeout"),
    ({}, "template vllm serves a model but none is named at $.model"),
])
def test_bad_serving_keys_are_one_line_each(model, message):
    with pytest.raises(ConfigError) as info:
        job_from_mapping({"name": "gen", "command": "x", "template": "vllm", "model": model}, source="job.yaml")
    assert any(message in p for p in info.value.problems), info.value.problems


def test_multi_node_serving_is_refused_clearly():
    with pytest.raises(ConfigError) as info:
        job_from_mapping({"name": "gen", "command": "x", "template": "vllm", "model": {"name": "m"},
                          "resources": {"nodes": 2}}, source="job.yaml")
    (problem,) = info.value.problems
    assert "resources.nodes is 2 at $.resources.nodes in job.yaml" in problem and "model.serve: false" in problem
    job_from_mapping({"name": "gen", "command": "x", "template": "vllm", "model": {"name": "m", "serve": False},
                      "resources": {"nodes": 2}}, source="job.yaml")


def test_multi_node_on_the_local_cluster_is_refused(ctx):
    job = job_from_mapping({"name": "t", "command": "x", "template": "training", "resources": {"nodes": 2}}, source="t.yaml")
    (problem,) = lifecycle.preflight(ctx, job, ctx.clusters["local"]).problems
    assert "resources.nodes is 2, but cluster 'local' is this one machine" in problem


def test_plan_refuses_and_submit_force_goes_through(runjob_cli, runjob_home, tmp_path):
    import yaml

    spec = {"name": "short", "command": "true", "template": "vllm",
            "model": {"path": str(model_dir(tmp_path)), "max_tokens": 1024, "serve": False}}
    (runjob_home / "short.yaml").write_text(yaml.safe_dump(spec))
    plan = runjob_cli("plan", "short.yaml")
    assert plan.exit_code == 1 and f'"{RULE}"' in plan.output and "REFUSED" in plan.output
    assert runjob_cli("submit", "short.yaml", "--yes").exit_code != 0
    forced = runjob_cli("submit", "short.yaml", "--yes", "--force")
    assert forced.exit_code == 0, forced.output
