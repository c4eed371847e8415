"""Engines (vllm, hf, sglang), optimizers, offload, pure bf16, LoRA targets per architecture."""

from __future__ import annotations

import json

import pytest

from runjob_core.errors import RunjobError
from runjob_core.estimator import arch_from_config, count_params, estimate, kv_bytes_per_token
from runjob_core.estimator.catalog import find_model

GIB = 1 << 30
BLOOM = {"model_type": "bloom", "vocab_size": 250880, "hidden_size": 4096, "n_layer": 30, "n_head": 32}
GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024}
NEOX = {"model_type": "gpt_neox", "vocab_size": 50432, "hidden_size": 2560, "num_hidden_layers": 32,
        "num_attention_heads": 32, "intermediate_size": 10240, "max_position_embeddings": 2048}


def _model(tmp_path, cfg, name="m"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


def test_hf_generate_is_weights_plus_the_generated_kv_not_a_vllm_budget():
    # the example: a 0.5B model through transformers was said to "need" 72 GiB (vLLM's 0.9 x 80 GB)
    vllm = estimate("Qwen2.5-0.5B", "inference", "H100", max_model_len=2048)
    hf = estimate("Qwen2.5-0.5B", "inference", "H100", max_model_len=2048, engine="hf")
    assert vllm.total_gib > 70 and hf.engine == "hf"
    assert hf.total_gib < 2.5 and hf.fits
    kv = kv_bytes_per_token(arch_from_config(find_model("Qwen2.5-0.5B").config), 2.0) * 2048
    assert hf.kv_cache_gib == pytest.approx(kv * (1 + 1 / 24) / GIB)  # + one layer's torch.cat copy
    assert hf.torch_peak_gib == pytest.approx(hf.weights_gib + hf.kv_cache_gib + hf.activations_gib)
    assert hf.total_gib == pytest.approx(hf.torch_peak_gib + 0.5)  # + CUDA context
    four = estimate("Qwen2.5-0.5B", "inference", "H100", max_model_len=2048, engine="hf", concurrency=4)
    assert four.kv_cache_gib == pytest.approx(4 * hf.kv_cache_gib)
    with pytest.raises(RunjobError, match="engine hf has no tensor parallelism"):
        estimate("Qwen2.5-0.5B", "inference", "H100", engine="hf", tp=2)


def test_hf_spreads_layers_over_gpus_and_suggests_it():
    one = estimate("Llama-3.1-70B", "inference", "A100-80GB", engine="hf", max_model_len=4096)
    assert not one.fits
    text = " | ".join(one.suggestions)
    assert text.startswith("spread the layers over 2 x A100-80GB (device_map='auto')") and "tp" not in text.split(";")[0]
    two = estimate("Llama-3.1-70B", "inference", "A100-80GB", engine="hf", max_model_len=4096, num_gpus=2)
    assert two.fits and two.weights_gib == pytest.approx(one.weights_gib / 2)
    assert two.kv_cache_gib == pytest.approx(one.kv_cache_gib / 2, rel=0.05)
    assert any("device_map" in n for n in two.notes)
    with pytest.raises(RunjobError, match="unknown engine"):
        estimate("Qwen2.5-0.5B", "inference", "H100", engine="tgi")


def test_sglang_pool_is_mem_fraction_static_of_the_card_minus_what_is_loaded():
    e = estimate("Llama-3.1-8B", "inference", "H100", engine="sglang", max_model_len=32768, mem_fraction_static=0.85)
    b = e.breakdown
    vram = e.gpu_vram_gib
    rest = vram - e.weights_gib - b["cuda_context_gib"] - b["non_torch_gib"] - vram * 0.15
    assert b["kv_available_gib"] == pytest.approx(rest, abs=1e-6)
    assert e.kv_capacity_tokens == int(rest * GIB // 131072)
    lower = estimate("Llama-3.1-8B", "inference", "H100", engine="sglang", max_model_len=32768, mem_fraction_static=0.5)
    assert lower.kv_capacity_tokens < e.kv_capacity_tokens
    # too little left outside the pool for a prefill chunk and CUDA graphs
    tight = estimate("Llama-3.1-8B", "inference", "RTX-4090", engine="sglang", max_model_len=4096,
                     mem_fraction_static=0.99)
    assert not tight.fits and any("outside the pool" in n for n in tight.notes)


def test_vllm_profile_size_graphs_and_eager():
    small = estimate("Llama-3.1-8B", "inference", "RTX-3090", max_model_len=16384, max_num_batched_tokens=2048)
    big = estimate("Llama-3.1-8B", "inference", "RTX-3090", max_model_len=16384, max_num_batched_tokens=16384)
    assert big.activations_gib > small.activations_gib and big.kv_capacity_tokens < small.kv_capacity_tokens
    graphs = estimate("Llama-3.1-8B", "inference", "H100", gpu_memory_utilization=0.993, max_model_len=8192)
    eager = estimate("Llama-3.1-8B", "inference", "H100", gpu_memory_utilization=0.993, max_model_len=8192,
                     enforce_eager=True)
    assert eager.breakdown["cuda_graphs_gib"] == 0 and graphs.breakdown["cuda_graphs_gib"] > 0
    assert eager.fits and not graphs.fits  # graphs + context no longer fit outside the budget
    tp = estimate("Llama-3.1-8B", "inference", "H100", num_gpus=2, max_model_len=8192)
    assert tp.breakdown["non_torch_gib"] > small.breakdown["non_torch_gib"]  # NCCL buffers under TP


def test_optimizers_pure_bf16_paged_and_offload():
    kw = dict(seq_len=1024, grad_checkpointing=True)
    adamw = estimate("Llama-3.1-8B", "full_ft", "H200", **kw)
    psi = adamw.params_total
    assert adamw.optimizer_gib == pytest.approx(12 * psi / GIB)  # fp32 master + two moments
    eight = estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="adamw8bit", **kw)
    assert eight.optimizer_gib == pytest.approx(6 * psi / GIB)
    sgd = estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="sgd", **kw)
    ada = estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="adafactor", **kw)
    assert sgd.optimizer_gib == pytest.approx(4 * psi / GIB)  # the fp32 master copy only
    assert sgd.optimizer_gib < ada.optimizer_gib < eight.optimizer_gib
    pure = estimate("Llama-3.1-8B", "full_ft", "H200", master_weights=False, **kw)
    assert pure.optimizer_gib == pytest.approx(4 * psi / GIB)  # bf16 moments, no fp32 copy
    paged = estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="paged_adamw8bit", master_weights=False, **kw)
    assert paged.optimizer_gib == 0 and paged.paged_gib == pytest.approx(2 * psi / GIB)
    assert any("unified memory" in n for n in paged.notes)
    assert estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="paged_adamw_8bit", **kw).paged_gib > 0  # old name
    off = estimate("Llama-3.1-8B", "full_ft", "H200", cpu_offload=True, **kw)
    assert off.optimizer_gib == 0 and off.offloaded_gib == pytest.approx((12 + 2) * psi / GIB)
    assert off.weights_gib == adamw.weights_gib and off.gradients_gib < adamw.gradients_gib / 10
    off3 = estimate("Llama-3.1-8B", "full_ft", "A100-40GB", cpu_offload=True, zero_stage=3, **kw)
    assert off3.weights_gib == 0 and off3.offloaded_gib > off.offloaded_gib and off3.fits
    assert off3.breakdown["zero3_gather_gib"] > 0
    with pytest.raises(RunjobError, match="unknown optimizer"):
        estimate("Llama-3.1-8B", "full_ft", "H200", optimizer="lion")


def test_training_activations_flash_and_checkpointing_and_logits():
    flash = estimate("Llama-3.1-8B", "full_ft", "H200", seq_len=8192)
    eager = estimate("Llama-3.1-8B", "full_ft", "H200", seq_len=8192, flash_attention=False)
    assert eager.activations_gib > flash.activations_gib * 2  # the s^2 scores only without flash/SDPA
    ckpt = estimate("Llama-3.1-8B", "full_ft", "H200", seq_len=8192, grad_checkpointing=True)
    b = ckpt.breakdown
    per_layer = b["activation_bytes_per_token_layer"]
    assert b["activations_layers_gib"] == pytest.approx(8192 * (32 * 2 * 4096 + per_layer) / GIB)
    assert b["activations_logits_gib"] == pytest.approx(8192 * 128256 * 12 / GIB)  # vocab x tokens, fp32 loss


def test_lora_targets_follow_the_architecture(tmp_path):
    bloom = _model(tmp_path, BLOOM, "bloom")
    e = estimate(bloom, "lora", "A100-80GB", lora_rank=8)
    assert e.settings["lora_targets"] == ["query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"]
    h, L = 4096, 30
    qkv = estimate(bloom, "lora", "A100-80GB", lora_rank=8, lora_targets=["query_key_value"])
    assert qkv.params_trainable == 8 * (h + 3 * h) * L  # PEFT's BLOOM default: 7,864,320
    with pytest.raises(RunjobError, match="unknown LoRA target module 'gate_proj' for bloom.*query_key_value"):
        estimate(bloom, "lora", "A100-80GB", lora_targets=["gate_proj"])
    gpt2 = _model(tmp_path, GPT2, "gpt2")
    g = estimate(gpt2, "lora", "T4", lora_rank=4, lora_targets=["c_attn"])
    assert g.params_trainable == 4 * (768 + 3 * 768) * 12
    neox = _model(tmp_path, NEOX, "neox")
    assert estimate(neox, "qlora", "T4").settings["lora_targets"][0] == "query_key_value"
    # MoE: experts only when asked; every expert then gets an adapter
    moe = estimate("Mixtral-8x7B", "lora", "H200", lora_rank=8)
    with_experts = estimate("Mixtral-8x7B", "lora", "H200", lora_rank=8,
                            lora_targets=["q_proj", "k_proj", "v_proj", "o_proj", "experts"])
    assert with_experts.params_trainable - moe.params_trainable == 8 * 3 * (4096 + 14336) * 8 * 32
    assert any("every routed expert" in n for n in with_experts.notes)


def test_moe_and_mla_layouts():
    v3 = arch_from_config(find_model("DeepSeek-V3").config)
    assert kv_bytes_per_token(v3, 1.0) == 61 * (512 + 64)  # MLA: the latent and the RoPE key only
    e = estimate("Qwen3-30B-A3B", "inference", "H100", engine="hf", max_model_len=4096)
    c = count_params(arch_from_config(find_model("Qwen3-30B-A3B").config))
    assert e.weights_gib == pytest.approx(c["total"] * 2 / GIB)  # all experts resident
    assert c["active"] < c["total"] / 5


def test_gpt_bigcode_is_multi_query(tmp_path):
    cfg = {"model_type": "gpt_bigcode", "vocab_size": 49152, "n_embd": 6144, "n_layer": 40, "n_head": 48,
           "n_inner": 24576, "n_positions": 8192}
    a = arch_from_config(cfg)
    assert a.kv_heads == 1 and kv_bytes_per_token(a, 2.0) == 2 * 40 * 128 * 2
