"""Model resolution (local path, Hugging Face cache, table) and GPU lookup."""

from __future__ import annotations

import json

import pytest

from runjob_core.errors import RunjobError
from runjob_core.estimator import GPUS, estimate, lookup_gpu, resolve_model
from runjob_core.estimator.catalog import find_model

CFG = dict(find_model("Qwen2.5-0.5B").config)


@pytest.fixture(autouse=True)
def _empty_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def test_table_lookup_is_case_insensitive_by_repo_or_short_name():
    for name in ("Llama-3.1-8B", "llama-3.1-8b", "meta-llama/Llama-3.1-8B", "META-LLAMA/LLAMA-3.1-8B-INSTRUCT",
                 "Meta-Llama-3.1-8B-Instruct"):
        r = resolve_model(name)
        assert r.origin == "table" and r.name == "Llama-3.1-8B", name
    assert resolve_model("qwen/qwen3-30b-a3b").name == "Qwen3-30B-A3B"


def test_local_folder_and_file(tmp_path):
    d = tmp_path / "my-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CFG))
    r = resolve_model(str(d))
    assert r.origin == "path" and r.config["hidden_size"] == 896
    r = resolve_model(str(d / "config.json"))
    assert r.origin == "path"
    e = estimate(str(d), "inference", "T4")
    assert e.params_total == find_model("Qwen2.5-0.5B").published_params


def test_folder_without_config_is_an_error(tmp_path):
    with pytest.raises(RunjobError, match="without a config.json"):
        resolve_model(str(tmp_path))


def _cache(root, repo, cfg, with_ref=True):
    base = root / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg))
    if with_ref:
        (base / "refs").mkdir()
        (base / "refs" / "main").write_text("abc123")


def test_hf_cache_via_hf_hub_cache(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    _cache(hub, "acme/tiny-llm", CFG)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    r = resolve_model("acme/tiny-llm")
    assert r.origin == "hf-cache" and r.name == "acme/tiny-llm"
    assert resolve_model("ACME/Tiny-LLM").origin == "hf-cache"
    assert resolve_model("tiny-llm").origin == "hf-cache"


def test_hf_cache_via_hf_home_and_cache_wins_over_table(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    changed = dict(CFG, num_hidden_layers=2)
    _cache(tmp_path / "hf" / "hub", "Qwen/Qwen2.5-0.5B", changed, with_ref=False)
    r = resolve_model("Qwen/Qwen2.5-0.5B")
    assert r.origin == "hf-cache" and r.config["num_hidden_layers"] == 2


def test_unknown_model_names_what_was_tried_and_close_names():
    with pytest.raises(RunjobError) as ei:
        resolve_model("Qwen2.5-8B")
    msg = str(ei.value)
    assert "not a local path" in msg and "Hugging Face cache" in msg and "built-in table" in msg
    assert "Qwen2.5-7B" in msg


def test_config_missing_fields_is_an_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(RunjobError, match="lacks"):
        estimate(str(tmp_path), "inference", "H100")


def test_gpu_lookup():
    assert lookup_gpu("h100").name == "H100-80GB"
    assert lookup_gpu("NVIDIA H100 80GB HBM3").name == "H100-80GB"
    assert lookup_gpu("a100-40gb").name == "A100-40GB"
    assert lookup_gpu("RTX 4090").name == "RTX-4090"
    assert lookup_gpu("geforce rtx 3090").name == "RTX-3090"
    assert lookup_gpu("Tesla T4").name == "T4"
    assert abs(lookup_gpu("H100").total_gib - 79.19) < 0.01
    with pytest.raises(RunjobError, match="ambiguous"):
        lookup_gpu("A100")
    with pytest.raises(RunjobError, match="unknown GPU"):
        lookup_gpu("B200")


def test_gpu_table_reports_less_than_marketing_size():
    names = {g.name for g in GPUS}
    assert {"H200", "GH200", "H100-80GB", "A100-80GB", "A100-40GB", "L40S", "RTX-A6000", "RTX-4090",
            "RTX-3090", "T4"} <= names
    for g in GPUS:
        assert g.marketing_gb * 0.9 < g.total_gib < g.marketing_gb  # CUDA reports less than the label
        assert g.source
