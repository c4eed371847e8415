"""Parameter counts and KV-cache bytes from config.json arithmetic."""

from __future__ import annotations

import pytest

from runjob_core.estimator import MODELS, arch_from_config, count_params, kv_bytes_per_token
from runjob_core.estimator.catalog import find_model


def _arch(name):
    return arch_from_config(find_model(name).config)


def test_table_has_at_least_20_models_with_sources():
    assert len(MODELS) >= 20
    for m in MODELS:
        assert m.repo_id.count("/") == 1
        assert m.source.startswith("https://huggingface.co/") and m.source.endswith("config.json")
        assert m.published_params > 0


@pytest.mark.parametrize("spec", MODELS, ids=[m.name for m in MODELS])
def test_param_count_within_2_percent_of_published(spec):
    total = count_params(arch_from_config(spec.config))["total"]
    assert abs(total / spec.published_params - 1) <= 0.02, (total, spec.published_params)


def test_tied_embeddings_have_no_lm_head():
    c = count_params(_arch("Llama-3.2-1B"))
    assert c["lm_head"] == 0 and c["embedding"] == 128256 * 2048
    c = count_params(_arch("Llama-3.1-8B"))
    assert c["lm_head"] == c["embedding"] == 128256 * 4096


def test_hand_computed_llama_8b_parts():
    c = count_params(_arch("Llama-3.1-8B"))
    h, i, L, kv = 4096, 14336, 32, 8 * 128
    attn = L * (h * h + 2 * h * kv + h * h)
    mlp = L * 3 * h * i
    norms = L * 2 * h + h
    assert c["attention"] == attn
    assert c["mlp_dense"] == mlp
    assert c["total"] == 2 * 128256 * h + attn + mlp + norms


def test_qwen2_counts_qkv_bias():
    c = count_params(_arch("Qwen2.5-0.5B"))
    L, h, kv = 24, 896, 2 * 64
    attn_w = L * (h * h + 2 * h * kv + h * h)
    assert c["attention"] == attn_w + L * (h + 2 * kv)


def test_moe_counts_all_experts_and_active():
    c = count_params(_arch("Mixtral-8x7B"))
    assert c["moe_experts"] == 32 * 8 * 3 * 4096 * 14336
    assert c["router"] == 32 * 4096 * 8
    assert 12.5e9 < c["active"] < 13.2e9  # "12.9B active"
    q = count_params(_arch("Qwen3-30B-A3B"))
    assert 3.2e9 < q["active"] < 3.5e9  # "3.3B activated"


def test_deepseek_shared_experts_dense_first_layers_and_mla():
    a = _arch("DeepSeek-V3")
    assert a.n_moe_layers == 58 and a.is_mla
    c = count_params(a)
    assert c["mlp_dense"] == 3 * 3 * 7168 * 18432
    assert c["moe_shared"] == 58 * 3 * 7168 * 2048
    # MLA projections of one layer, by hand
    q = 7168 * 1536 + 1536 * 128 * (128 + 64)
    kv = 7168 * (512 + 64) + 512 * 128 * (128 + 128)
    o = 128 * 128 * 7168
    assert c["attention"] == 61 * (q + kv + o + 1536 + 512)
    assert 36e9 < c["active"] < 38.5e9  # "37B activated"


def test_kv_bytes_per_token_gqa_by_hand():
    # 2 (K,V) * layers * kv_heads * head_dim * 2 bytes
    assert kv_bytes_per_token(_arch("Llama-3.1-8B"), 2) == 2 * 32 * 8 * 128 * 2 == 131072
    assert kv_bytes_per_token(_arch("Llama-3.1-70B"), 2) == 2 * 80 * 8 * 128 * 2 == 327680
    assert kv_bytes_per_token(_arch("Qwen2.5-7B"), 2) == 2 * 28 * 4 * 128 * 2 == 57344
    assert kv_bytes_per_token(_arch("Gemma-2-9B"), 2) == 2 * 42 * 8 * 256 * 2
    assert kv_bytes_per_token(_arch("Llama-2-7B"), 1) == 2 * 32 * 32 * 128  # MHA, fp8 cache


def test_kv_bytes_per_token_mla_by_hand():
    # layers * (kv_lora_rank + qk_rope_head_dim) * 2 bytes
    assert kv_bytes_per_token(_arch("DeepSeek-V2-Lite"), 2) == 27 * (512 + 64) * 2 == 31104
    assert kv_bytes_per_token(_arch("DeepSeek-V3"), 2) == 61 * (512 + 64) * 2 == 70272


def test_kv_bytes_per_gpu_under_tensor_parallelism():
    a = _arch("Llama-3.1-8B")
    assert kv_bytes_per_token(a, 2, tp=4) == 131072 / 4
    assert kv_bytes_per_token(a, 2, tp=16) == 2 * 32 * 1 * 128 * 2  # KV heads replicated
    m = _arch("DeepSeek-V2-Lite")
    assert kv_bytes_per_token(m, 2, tp=8) == 31104  # latent replicated


def test_multimodal_text_config_is_used():
    cfg = {"model_type": "llava", "text_config": dict(find_model("Llama-2-7B").config)}
    assert count_params(arch_from_config(cfg))["total"] == find_model("Llama-2-7B").published_params
