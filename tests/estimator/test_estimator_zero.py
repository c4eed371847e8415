"""ZeRO-0/1/2 beyond the model states: the optimizer step's fp32 gradient and the reduce bucket.

Each expected figure is derived here from DeepSpeed's code (quoted in
runjob_core/estimator/zero_buffers.py), not copied from the estimator; the DeepSpeed ZeRO
tutorial's runs (V100 32GB, Megatron GPT-2) check the verdicts end to end.
"""

from __future__ import annotations

import json

import pytest

from runjob_core.estimator import estimate
from runjob_core.estimator.gpus import GIB, lookup_gpu

#: DeepSpeed's default reduce_bucket_size: 5e8 elements of the 16-bit model dtype.
BUCKET_GIB = 5e8 * 2 / GIB
#: Megatron GPT-2 shapes from DeepSpeed's ZeRO tutorial (vocab 50257 padded to 50304).
GPT2_1_5B = {"model_type": "gpt2", "vocab_size": 50304, "n_embd": 1600, "n_layer": 48, "n_head": 16, "n_positions": 1024}
GPT2_10B = {"model_type": "gpt2", "vocab_size": 50304, "n_embd": 4096, "n_layer": 50, "n_head": 32, "n_positions": 1024}


def _model(tmp_path, config):
    folder = tmp_path / f"m{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _full(model, stage, n, **kw):
    settings = {"seq_len": 1024, "batch": 1, "num_gpus": n, "zero_stage": stage, "dtype": "bf16", **kw}
    return estimate(model, "full_ft", "A100-80GB", **settings).to_json()


@pytest.mark.parametrize("optimizer, temp_b", [("adamw_fused", 0.0), ("adamw", 4.0)])
def test_zero2_step_builds_a_16bit_flat_copy_and_its_fp32_cast_of_the_partition(optimizer, temp_b):
    # stage_1_and_2.py step(): flatten (2 B) then .to(fp32) (4 B) per partition element; the
    # optimizer then runs with the fp32 gradient after the 16-bit ones are freed (4 - 2 + temp)
    e = _full("Llama-3.1-8B", 2, 8, optimizer=optimizer, grad_checkpointing=True)
    psi = e["params_total"]
    want = psi / 8 * max(6.0, 2.0 + temp_b) / GIB
    assert e["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(want, rel=1e-3)


def test_stage0_fp16_optimizer_step_holds_every_gradient_in_fp32_twice():
    # FP16_Optimizer.step: _flatten_dense_tensors([p.grad.to(fp32) ...]): the per-parameter
    # fp32 copies and their flat concatenation, 4 + 4 bytes per parameter
    e = _full("Llama-3.2-1B", 0, 1, optimizer="adamw_fused")
    assert e["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(e["params_total"] * 8 / GIB, rel=1e-3)


def test_the_fp32_step_gradient_needs_an_fp32_master_copy():
    # pure bf16 (no master copy) steps the bf16 parameters with their bf16 gradients:
    # only the optimizer's own temporaries (foreach AdamW: a bf16 list like the parameters)
    pure = _full("Llama-3.1-8B", 2, 8, optimizer="adamw", master_weights=False)
    assert pure["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(
        pure["params_total"] / 8 * 2.0 / GIB, rel=1e-3)
    # CPU offload steps on the host; stage 3 keeps its own accounting
    assert _full("Llama-3.1-8B", 2, 8, cpu_offload=True)["breakdown"]["optimizer_step_temporaries_gib"] == 0.0
    stage3 = _full("Llama-3.1-8B", 3, 8, optimizer="adamw")
    assert stage3["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(
        stage3["params_total"] / 8 * 4.0 / GIB, rel=1e-3)


@pytest.mark.parametrize("stage, bucket", [(0, 0.0), (1, BUCKET_GIB), (2, BUCKET_GIB), (3, 0.0)])
def test_zero1_and_2_hold_one_reduce_bucket_during_backward(stage, bucket):
    e = _full("Llama-3.2-1B", stage, 4, seq_len=4096, batch=4)
    b = e["breakdown"]
    assert b["reduce_bucket_gib"] == pytest.approx(bucket, abs=1e-4)
    # long sequences without checkpointing: backward (activations + bucket) is the peak
    assert e["activations_gib"] > b["optimizer_step_temporaries_gib"]
    rest = e["torch_peak_gib"] - e["model_states_gib"] - b["zero3_gather_gib"]
    assert rest == pytest.approx(e["activations_gib"] + bucket, abs=2e-3)


def test_assumptions_name_the_step_cast_and_the_bucket():
    e = _full("Llama-3.1-8B", 2, 8, grad_checkpointing=True)
    text = "\n".join(e["assumptions"])
    assert "reduce bucket: 0.93 GiB" in text
    assert "cast to fp32 for the master copy" in text and "flat 16-bit copy of the rank's gradient partition" in text
    pure = "\n".join(_full("Llama-3.1-8B", 3, 8, master_weights=False)["assumptions"])
    assert "reduce bucket" not in pure and "cast to fp32" not in pure


def test_v100_32gb_is_known_with_the_capacity_pytorch_reports():
    assert lookup_gpu("Tesla V100-SXM3-32GB").total_bytes == pytest.approx(31.72 * GIB, rel=1e-6)


@pytest.mark.parametrize("config, stage, n, ckpt, fits", [
    (GPT2_1_5B, 0, 8, False, False),  # "Training this model without ZeRO fails with an out-of-memory (OOM) error"
    (GPT2_1_5B, 1, 8, False, True),   # "With ZeRO stage 1 enabled, the model can now train smoothly on 8 GPUs"
    (GPT2_10B, 2, 32, True, True),    # "training a model with 10B parameters using 32 V100 GPUs"
])
def test_deepspeed_zero_tutorial_runs(tmp_path, config, stage, n, ckpt, fits):
    e = estimate(_model(tmp_path, config), "full_ft", "V100-32GB", dtype="fp16", seq_len=1024, batch=1,
                 num_gpus=n, zero_stage=stage, grad_checkpointing=ckpt, optimizer="adamw_fused",
                 flash_attention=False).to_json()
    assert e["fits"] is fits, e["total_gib"]


def test_single_tensor_adamw_under_zero2_holds_two_temporaries_of_the_whole_partition():
    # LlamaFactory#1221: LLaMA-7B, ZeRO-2 on 8 V100 32GB, torch AdamW's single-tensor step
    # ('denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)') on DeepSpeed's flat
    # partition: 'Tried to allocate 3.14 GiB ... 28.28 GiB already allocated' -> OOM
    e = estimate("Llama-2-7B", "full_ft", "V100-32GB", dtype="fp16", seq_len=1024, batch=1, num_gpus=8,
                 zero_stage=2, grad_checkpointing=True, optimizer="adamw_single").to_json()
    part = e["params_total"] / 8
    # fp32 gradient (4) - freed 16-bit gradients (2) + sqrt and quotient (4 + 4)
    assert e["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(part * 10 / GIB, rel=1e-3)
    assert e["torch_peak_gib"] == pytest.approx(28.28 + 3.14, rel=0.02)
    assert e["fits"] is False


def test_single_tensor_adamw_without_flattening_scales_with_the_largest_tensor():
    e = _full("Llama-3.1-8B", 3, 8, optimizer="adamw_single")
    largest = 128256 * 4096  # the embedding / LM head of Llama 3.1 8B
    assert e["breakdown"]["optimizer_step_temporaries_gib"] == pytest.approx(8 * largest / 8 / GIB, rel=1e-3)
