"""Memory model behaviour: inference budget, training sharding, suggestions, walltime."""

from __future__ import annotations

import pytest

from runjob_core.errors import RunjobError
from runjob_core.estimator import estimate, estimate_walltime

GIB = 1 << 30


def test_inference_budget_arithmetic():
    e = estimate("Llama-3.1-8B", "inference", "H100", max_model_len=32768)
    b = e.breakdown
    assert b["vllm_budget_gib"] == pytest.approx(79.19 * 0.9, rel=1e-3)
    kv_avail = b["vllm_budget_gib"] - e.weights_gib - e.activations_gib - b["non_torch_gib"]
    assert b["kv_available_gib"] == pytest.approx(kv_avail, abs=1e-6)
    assert e.kv_capacity_tokens == int(kv_avail * GIB // 131072 // 16 * 16)
    assert e.kv_capacity_tokens % 16 == 0
    assert e.kv_cache_gib == pytest.approx(32768 * 131072 / GIB)
    assert e.fits and e.max_concurrency == pytest.approx(e.kv_capacity_tokens / 32768, abs=0.01)
    assert e.headroom_gib == pytest.approx(kv_avail - e.kv_cache_gib, abs=1e-6)


def test_concurrency_and_gpu_memory_utilization():
    base = estimate("Llama-3.1-8B", "inference", "RTX-4090", max_model_len=8192)
    assert base.fits
    many = estimate("Llama-3.1-8B", "inference", "RTX-4090", max_model_len=8192, concurrency=64)
    assert not many.fits and many.kv_cache_gib == pytest.approx(64 * base.kv_cache_gib)
    low = estimate("Llama-3.1-8B", "inference", "RTX-4090", max_model_len=8192, gpu_memory_utilization=0.7)
    assert low.kv_capacity_tokens < base.kv_capacity_tokens
    assert not low.fits  # 0.7 x 23.55 GiB does not even hold the weights plus profile


def test_tensor_parallel_splits_weights_and_kv():
    one = estimate("Qwen2.5-72B", "inference", "H100", num_gpus=1, max_model_len=8192)
    four = estimate("Qwen2.5-72B", "inference", "H100", num_gpus=4, max_model_len=8192)
    assert not one.fits and four.fits and four.tp == 4
    assert four.weights_gib == pytest.approx(one.weights_gib / 4)
    assert four.kv_bytes_per_token == one.kv_bytes_per_token  # whole-model figure
    with pytest.raises(RunjobError, match="does not divide"):
        estimate("Qwen2.5-72B", "inference", "H100", num_gpus=3)


def test_quantized_weights_are_smaller():
    bf16 = estimate("Llama-3.1-70B", "inference", "H100", num_gpus=4).weights_gib
    fp8 = estimate("Llama-3.1-70B", "inference", "H100", num_gpus=4, dtype="fp8").weights_gib
    int4 = estimate("Llama-3.1-70B", "inference", "H100", num_gpus=4, dtype="int4").weights_gib
    assert bf16 > fp8 > int4 > bf16 / 4


def test_70b_bf16_on_one_a100_40gb_suggests_tensor_parallelism():
    e = estimate("Llama-3.1-70B", "inference", "A100-40GB", max_model_len=8192)
    assert not e.fits
    text = " | ".join(e.suggestions)
    assert "tp=4" in text  # smallest tp that fits
    assert "max_model_len" not in text or "leave no room" in text
    assert "smaller model of the same family: Llama-3.1-8B" in text
    e = estimate("Llama-3.1-70B", "inference", "A100-40GB")  # max_model_len 131072
    assert any(s.startswith(("use tp=4", "use tp=8")) for s in e.suggestions)


def test_suggests_max_model_len_and_bigger_gpu():
    e = estimate("Llama-3.1-8B", "inference", "RTX-4090")  # 128k context does not fit in 24 GB
    assert not e.fits
    text = " | ".join(e.suggestions)
    assert "lower max_model_len to" in text
    assert "or 1 x A100-40GB" in text  # the smallest GPU type that fits
    assert text.startswith("use tp=2")


def test_full_ft_sharding_matches_zero_paper_fractions():
    kw = dict(num_gpus=8, seq_len=1024, grad_checkpointing=True)
    s = [estimate("Llama-3.1-8B", "full_ft", "H100", zero_stage=z, **kw) for z in range(4)]
    psi = s[0].params_total
    assert s[0].model_states_gib == pytest.approx(16 * psi / GIB)
    assert s[1].optimizer_gib == pytest.approx(12 * psi / 8 / GIB)
    assert s[2].gradients_gib == pytest.approx(2 * psi / 8 / GIB)
    assert s[3].weights_gib == pytest.approx(2 * psi / 8 / GIB)
    assert [x.model_states_gib for x in s] == sorted((x.model_states_gib for x in s), reverse=True)


def test_checkpointing_and_methods_order():
    kw = dict(seq_len=4096, batch=2)
    full = estimate("Llama-3.1-8B", "full_ft", "H200", **kw)
    ckpt = estimate("Llama-3.1-8B", "full_ft", "H200", grad_checkpointing=True, **kw)
    assert ckpt.activations_gib < full.activations_gib / 3
    lora = estimate("Llama-3.1-8B", "lora", "H200", grad_checkpointing=True, **kw)
    qlora = estimate("Llama-3.1-8B", "qlora", "H200", grad_checkpointing=True, **kw)
    assert ckpt.total_gib > lora.total_gib > qlora.total_gib
    # without checkpointing bitsandbytes keeps every 4-bit linear's input, LoRA's frozen
    # nn.Linear layers do not: QLoRA holds more activations than LoRA
    assert (estimate("Llama-3.1-8B", "qlora", "H200", **kw).activations_gib
            > estimate("Llama-3.1-8B", "lora", "H200", **kw).activations_gib)
    assert lora.params_trainable == 41_943_040  # r=16 on all 7 projections
    # NF4 (0.5 byte + double-quantised constants) for the decoder's linear layers; 16-bit
    # embeddings, LM head and norms; fp32 adapters
    from runjob_core.estimator import count_params, resolve_model, arch_from_config

    c = count_params(arch_from_config(resolve_model("Llama-3.1-8B").config))
    nf4 = c["linear"] * (0.5 + 1 / 64 + 4 / (64 * 256)) + (c["total"] - c["linear"]) * 2
    assert qlora.weights_gib == pytest.approx((nf4 + 4 * lora.params_trainable) / GIB)
    assert lora.optimizer_gib > 0 and lora.gradients_gib > 0


def test_training_suggestions_when_it_does_not_fit():
    e = estimate("Llama-3.1-8B", "full_ft", "A100-80GB", seq_len=4096, batch=4)
    assert not e.fits
    text = " | ".join(e.suggestions)
    assert "ZeRO-3/FSDP over" in text and "gradient checkpointing" in text
    e = estimate("Llama-3.1-70B", "lora", "A100-80GB", seq_len=2048, grad_checkpointing=True)
    assert not e.fits and any("qlora" in s for s in e.suggestions)


def test_input_validation():
    with pytest.raises(RunjobError, match="unknown kind"):
        estimate("Llama-3.1-8B", "pretrain", "H100")
    with pytest.raises(RunjobError, match="unknown dtype"):
        estimate("Llama-3.1-8B", "inference", "H100", dtype="int3")
    with pytest.raises(RunjobError, match="qlora"):
        estimate("Llama-3.1-8B", "lora", "H100", dtype="int4")
    with pytest.raises(RunjobError, match="zero_stage"):
        estimate("Llama-3.1-8B", "full_ft", "H100", zero_stage=4)
    with pytest.raises(RunjobError, match="gpu_memory_utilization"):
        estimate("Llama-3.1-8B", "inference", "H100", gpu_memory_utilization=1.5)


def test_to_json_is_plain_data():
    import json

    d = estimate("DeepSeek-V3", "inference", "H200", num_gpus=8, dtype="fp8").to_json()
    json.dumps(d)
    assert d["kv_bytes_per_token"] == 70272 and d["fits"] is True


def test_walltime_within_limits():
    w = estimate_walltime(36_000, 10.0, requested_seconds=7200, partition_limit_seconds=86400)
    assert w["walltime_seconds"] == 3600 and w["walltime"] == "01:00:00"
    assert not w["exceeds_requested"] and not w["exceeds_partition_limit"] and w["segments"] == 1


def test_walltime_segments_use_the_smaller_limit():
    w = estimate_walltime(1_000_000, 5.0, requested_seconds=48 * 3600, partition_limit_seconds=24 * 3600)
    assert w["walltime_seconds"] == 200_000
    assert w["exceeds_requested"] and w["exceeds_partition_limit"]
    assert w["limit_seconds"] == 86400 and w["segments"] == 3  # ceil(200000 / 86400)
    assert w["walltime"] == "2-07:33:20"
    w = estimate_walltime(100, 1.0, requested_seconds=30)
    assert w["segments"] == 4 and w["exceeds_requested"] and not w["exceeds_partition_limit"]
    assert estimate_walltime(100, 1.0)["segments"] == 1


def test_walltime_rejects_bad_input():
    with pytest.raises(RunjobError):
        estimate_walltime(100, 0)
    with pytest.raises(RunjobError):
        estimate_walltime(-1, 1.0)
    with pytest.raises(RunjobError):
        estimate_walltime(1, 1.0, requested_seconds=0)
