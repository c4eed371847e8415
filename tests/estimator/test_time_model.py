"""The time model: what it counts, which bound it names, and how it scores on measured rates."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from runjob_core.estimator import decoding, estimate, gpus, rates, timing
from runjob_core.estimator.eta import eta_of
from runjob_core.estimator.gpu_peaks import PEAKS, peaks_for
from runjob_core.estimator.time_preflight import time_object

sys.path.insert(0, str(Path(__file__).parent))
import time_eval  # noqa: E402


def rate(model, kind, gpu, work=None, **kw):
    framework = kw.pop("framework", "hf")
    grad_accum = kw.pop("grad_accum", 1)
    nodes = kw.pop("nodes", 1)
    est = estimate(model, kind, gpu, suggest=False, **kw)
    return time_object(est, model, work=work or {}, framework=framework, grad_accum=grad_accum, nodes=nodes)


def test_every_gpu_of_the_memory_table_has_peaks_with_a_source():
    assert {p.name for p in PEAKS} == {g.name for g in gpus.GPUS}
    for p in PEAKS:
        assert p.source.startswith("http") and p.bf16_tflops > 0 and p.hbm_gb_s > 0 and p.link_gb_s > 0
    assert peaks_for("h100").fp8_tflops == 1979.0 and peaks_for("A100-80GB").fp8_tflops is None


def test_lora_skips_weight_gradients_and_checkpointing_adds_a_forward():
    full = rate("Llama-3.1-8B", "full_ft", "H100", seq_len=4096, batch=4)
    lora = rate("Llama-3.1-8B", "lora", "H100", seq_len=4096, batch=4)
    # 3 passes against 2, less the adapters' own cost (LORA_FACTOR); the optimizer step differs a little
    assert lora["tokens_per_s"] / full["tokens_per_s"] == pytest.approx(1.5 * timing.LORA_FACTOR, rel=0.03)
    gc = rate("Llama-3.1-8B", "full_ft", "H100", seq_len=4096, batch=4, grad_checkpointing=True)
    assert full["tokens_per_s"] / gc["tokens_per_s"] == pytest.approx(4 / 3, rel=0.03)
    assert full["bound"] == "compute" and any("3 passes" in a for a in full["assumptions"])
    assert any("2 passes" in a and "no base weight gradients" in a for a in lora["assumptions"])


def test_moe_counts_active_parameters():
    dense = rate("Qwen3-32B", "full_ft", "H100", seq_len=2048, batch=2)
    moe = rate("Qwen3-30B-A3B", "full_ft", "H100", seq_len=2048, batch=2)
    assert moe["tokens_per_s"] > 4 * dense["tokens_per_s"]  # ~3B active against 32B


def test_data_parallel_over_the_network_costs_more_than_over_nvlink():
    one_node = rate("Llama-3.1-8B", "full_ft", "H100", num_gpus=8, zero_stage=3, seq_len=2048, batch=1)
    two_nodes = rate("Llama-3.1-8B", "full_ft", "H100", num_gpus=16, zero_stage=3, seq_len=2048, batch=1, nodes=2)
    assert two_nodes["tokens_per_s"] < one_node["tokens_per_s"]
    assert any("network per GPU" in a for a in two_nodes["assumptions"])
    pcie = rate("Llama-3.2-1B", "full_ft", "RTX-4090", num_gpus=4, seq_len=512, batch=1)
    assert pcie["bound"] == "communication"


def test_inference_bounds_by_engine():
    hf1 = rate("Llama-3.1-8B", "inference", "H100", engine="hf", concurrency=1, max_model_len=2048,
               work={"input_tokens": 256.0, "output_tokens": 256.0})
    assert hf1["bound"] == "overhead" and 20 < hf1["tokens_per_s"] < 80
    hf32 = rate("Llama-3.1-8B", "inference", "H100", engine="hf", concurrency=32, max_model_len=2048,
                work={"input_tokens": 256.0, "output_tokens": 256.0})
    assert hf32["tokens_per_s"] > 10 * hf1["tokens_per_s"]  # the launch cost is paid once per step for the batch
    vllm = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=2048,
                work={"input_tokens": 256.0, "output_tokens": 256.0})
    assert vllm["bound"] == "memory" and vllm["tokens_per_s"] > 20 * hf1["tokens_per_s"]
    prefill = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=9000,
                   work={"input_tokens": 8000.0, "output_tokens": 8.0})
    assert prefill["bound"] == "compute"


def test_decode_bandwidth_is_capped_by_the_sms():
    # the H100 SXM reaches the prior share of its HBM: the per-SM figure is derived from it
    assert decoding.decode_bandwidth(peaks_for("H100-80GB"))[0] == pytest.approx(0.75 * 3350e9)
    assert decoding.decode_bandwidth(peaks_for("A100-80GB"))[0] == pytest.approx(0.75 * 2039e9)  # SMs to spare
    h20, why = decoding.decode_bandwidth(peaks_for("H20"))
    assert h20 == pytest.approx(78 * 0.75 * 3350e9 / 132) and "78 SMs" in why  # 1.5 TB/s of its 4.0
    assert decoding.decode_bandwidth(peaks_for("H200"))[0] == pytest.approx(0.75 * 3350e9)  # the H100's 132 SMs
    work = {"input_tokens": 1.0, "output_tokens": 2048.0, "rows": 1, "tokens": 2048.0}
    h100 = rate("Qwen3-32B", "inference", "H100", engine="sglang", max_model_len=4096, work=work)
    on_h20 = rate("Qwen3-32B", "inference", "H20", engine="sglang", max_model_len=4096, work=work)
    # 4.0 TB/s against 3.35, yet slower: the H20 has 78 SMs to the H100's 132 (the kernels' fixed cost is the same)
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    fixed = decoding.graph_kernels(arch_from_config(resolve_model("Qwen3-32B").config)) * decoding.GRAPH_KERNEL_S
    weights_h100 = 1 / h100["tokens_per_s"] - fixed
    assert 1 / on_h20["tokens_per_s"] == pytest.approx(weights_h100 * 132 / 78 + fixed, rel=0.03)
    assert any("78 SMs" in a for a in on_h20["assumptions"])


def test_tensor_parallel_all_reduces_are_gpu_time_sglang_cannot_hide():
    work = {"input_tokens": 1.0, "output_tokens": 2048.0, "rows": 1, "tokens": 2048.0}
    est = estimate("Qwen2.5-72B", "inference", "H100", engine="sglang", num_gpus=8, tp=8, max_model_len=4096,
                   suggest=False)
    tp8 = time_object(est, "Qwen2.5-72B", work=work)
    weights_s = est.weights_gib * (1 << 30) / decoding.decode_bandwidth(peaks_for("H100"))[0]
    kernels_s = 80 * 12 * decoding.GRAPH_KERNEL_S  # Qwen2.5: 12 graph kernels per dense layer, no q/k norm
    # one weight read per GPU, its kernels and 2 x 80 all-reduces, one after the other (the CPU step, hidden, is shorter)
    assert weights_s + kernels_s + 160 * decoding.TP_ALLREDUCE_S > decoding.ENGINE_STEP_S
    assert 1 / tp8["tokens_per_s"] == pytest.approx(weights_s + kernels_s + 160 * decoding.TP_ALLREDUCE_S, rel=0.02)
    assert any("tp all-reduces included" in a for a in tp8["assumptions"])


def test_transformers_moe_loops_over_every_expert_before_4_53():
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    arch = arch_from_config(resolve_model("Qwen3-30B-A3B").config)
    assert decoding.hf_loops_all_experts(arch, "4.51.3") and decoding.hf_loops_all_experts(arch, "4.52.4")
    assert not decoding.hf_loops_all_experts(arch, "4.53.0") and not decoding.hf_loops_all_experts(arch, None)
    assert not decoding.hf_loops_all_experts(arch_from_config(resolve_model("Qwen3-8B").config), "4.40")
    # batch 1, top-8 of 128 experts: 8 routed, 120 looped over on empty tensors
    assert decoding.experts_routed(arch, 1) == pytest.approx(8.0)
    per_layer_old = decoding.hf_moe_loop_s(arch, 1, True) / arch.n_moe_layers
    per_layer_new = decoding.hf_moe_loop_s(arch, 1, False) / arch.n_moe_layers
    assert per_layer_old == pytest.approx(decoding.EXPERT_LOOP_OPS * (8 * timing.EAGER_LAYER_S / 72
                                                                    + 120 * decoding.EAGER_EMPTY_OP_S))
    assert per_layer_new == pytest.approx(decoding.EXPERT_LOOP_OPS * 8 * timing.EAGER_LAYER_S / 72)
    work = {"input_tokens": 1.0, "output_tokens": 256.0, "rows": 1, "tokens": 256.0}
    est = estimate("Qwen3-30B-A3B", "inference", "H100", engine="hf", concurrency=1, max_model_len=512, suggest=False)
    old = time_object(est, "Qwen3-30B-A3B", work=work, transformers_version="4.51.3")
    new = time_object(est, "Qwen3-30B-A3B", work=work)
    assert old["bound"] == new["bound"] == "overhead" and new["tokens_per_s"] > 3 * old["tokens_per_s"]
    assert any("loops in Python over all 128 experts" in a for a in old["assumptions"])
    assert any("the ~8 routed experts" in a for a in new["assumptions"])


def test_a_static_generate_batch_runs_until_its_longest_row():
    work = {"input_tokens": 128.0, "output_tokens": 128.0, "rows": 64, "tokens": 64 * 128.0}
    even = rate("Llama-3.1-8B", "inference", "H100", engine="hf", concurrency=16, max_model_len=1024, work=work)
    capped = rate("Llama-3.1-8B", "inference", "H100", engine="hf", concurrency=16, max_model_len=1024,
                  work={**work, "longest_output_tokens": 512.0})
    # four batches of 16, each running 512 steps instead of 128: about 4x slower
    assert 3.5 < even["tokens_per_s"] / capped["tokens_per_s"] < 4.1
    assert any("every static batch runs until it ends" in a for a in capped["assumptions"])
    # a partial last batch still costs a whole batch's steps
    odd = rate("Llama-3.1-8B", "inference", "H100", engine="hf", concurrency=16, max_model_len=1024,
               work={**work, "rows": 65, "tokens": 65 * 128.0})
    assert odd["tokens_per_s"] < 0.85 * even["tokens_per_s"]


def test_vllm_adds_its_step_overhead_and_sglang_hides_it():
    work = {"input_tokens": 1.0, "output_tokens": 2048.0, "rows": 1, "tokens": 2048.0}
    vllm = rate("Qwen2.5-7B", "inference", "A100-80GB", engine="vllm", max_model_len=4096, work=work)
    sglang = rate("Qwen2.5-7B", "inference", "A100-80GB", engine="sglang", max_model_len=4096, work=work)
    # V0 vLLM schedules between forward passes: weights read + CPU step; SGLang overlaps the two
    assert vllm["tokens_per_s"] == pytest.approx(1 / (1 / sglang["tokens_per_s"] + decoding.ENGINE_STEP_S), rel=0.02)
    assert any("between forward passes: added" in a for a in vllm["assumptions"])
    tiny = rate("Qwen2.5-0.5B", "inference", "A100-80GB", engine="sglang", max_model_len=4096, work=work)
    # 0.65 ms of weights + 24 x 12 graph kernels: longer than the CPU step SGLang hides behind it
    assert tiny["bound"] == "memory" and 1 / tiny["tokens_per_s"] > decoding.ENGINE_STEP_S
    on_l40s = rate("Qwen2.5-0.5B", "inference", "L40S", engine="sglang", max_model_len=4096, work=work)
    assert on_l40s["tokens_per_s"] < tiny["tokens_per_s"]


def test_a_cuda_graph_step_pays_a_fixed_cost_per_kernel():
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    def arch(name):
        return arch_from_config(resolve_model(name).config)

    assert decoding.graph_kernels(arch("Qwen2.5-7B")) == 28 * 12
    assert decoding.graph_kernels(arch("Qwen3-8B")) == 36 * 14  # q/k RMSNorm
    assert decoding.graph_kernels(arch("Qwen3-30B-A3B")) == 48 * (14 + 4)  # the MoE MLP's routing kernels
    work = {"input_tokens": 1.0, "output_tokens": 2048.0, "rows": 1, "tokens": 2048.0}
    small = rate("Qwen2.5-1.5B", "inference", "A100-80GB", engine="sglang", max_model_len=4096, work=work)
    est = estimate("Qwen2.5-1.5B", "inference", "A100-80GB", engine="sglang", max_model_len=4096, suggest=False)
    weights_s = est.weights_gib * (1 << 30) / decoding.decode_bandwidth(peaks_for("A100-80GB"))[0]
    # 28 layers x 12 kernels x 4 us = 1.3 ms on a 2.2 ms weight read: small models pay it most
    assert 1 / small["tokens_per_s"] == pytest.approx(weights_s + 28 * 12 * decoding.GRAPH_KERNEL_S, rel=0.02)
    hf = rate("Qwen2.5-1.5B", "inference", "A100-80GB", engine="hf", concurrency=1, max_model_len=4096, work=work)
    assert hf["bound"] == "overhead"  # eager generate: the CPU launches are the step, not the graph


def test_a_continuous_batch_pays_the_longest_row_once_at_the_end():
    one_wave = {"input_tokens": 200.0, "output_tokens": 200.0, "rows": 200, "tokens": 200 * 200.0}
    even = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=2048, work=one_wave)
    tail = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=2048,
                work={**one_wave, "longest_output_tokens": 1600.0})
    assert tail["tokens_per_s"] < 0.5 * even["tokens_per_s"]  # one wave: the job lasts as long as its longest row
    many = {**one_wave, "rows": 200_000, "tokens": 200_000 * 200.0}
    many_even = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=2048, work=many)
    many_tail = rate("Llama-3.1-8B", "inference", "H100", engine="vllm", max_model_len=2048,
                     work={**many, "longest_output_tokens": 1600.0})
    assert many_tail["tokens_per_s"] > 0.98 * many_even["tokens_per_s"]  # slots refill: the tail is a rounding error


def test_model_max_tokens_above_the_mean_is_the_longest_row():
    from runjob_core.estimator.time_job import work_of

    job = SimpleNamespace(params={"rows": 10, "output_tokens": 100, "input_tokens": 50},
                          model=SimpleNamespace(max_tokens=1000), data=SimpleNamespace(input=None), source="job.yaml")
    work = work_of(job, "inference", 1, 1)
    assert work["longest_output_tokens"] == 1000.0 and "model.max_tokens 1000" in work["counted"]
    job.model.max_tokens = 100
    assert "longest_output_tokens" not in work_of(job, "inference", 1, 1)


def test_total_and_segments_from_the_work():
    t = rate("Llama-3.1-8B", "lora", "H100", seq_len=4096, batch=4,
             work={"tokens": 20000 * 4 * 4096, "counted": "20,000 steps"})
    assert t["total_seconds"] == pytest.approx(20000 * 4 * 4096 / t["tokens_per_s"], rel=1e-3)
    assert timing.segments_for(t["total_seconds"], 3600) == -(-int(t["total_seconds"]) // 3600)
    assert timing.segments_for(100, 3600) == 1 and timing.segments_for(100, None) == 1
    assert t["gpu_hours"] == pytest.approx(t["total_seconds"] / 3600, rel=1e-6)


@pytest.mark.parametrize("log, kind, expected, where", [
    ("{'train_runtime': 100.0, 'train_samples_per_second': 10.0, 'train_steps_per_second': 0.625}\n", "lora",
     10.0 * 4096 / 2, "train_samples_per_second"),
    ("Processed prompts: 100%|##| 32/32 [00:48<00:00,  1.53s/it, est. speed input: 28.13 toks/s, output: 335.00 toks/s]\n",
     "inference", 335.0, "vLLM est. speed output"),
    ("INFO Avg generation throughput: 0.0 tokens/s\nINFO Avg generation throughput: 900.5 tokens/s\n"
     "INFO Avg generation throughput: 950.0 tokens/s\nINFO Avg generation throughput: 1000.0 tokens/s\n", "inference",
     950.0, "vLLM Avg generation throughput"),
    ("step 10 tokens_per_s=1234.5\n", "inference", 1234.5, "tokens/s print"),
    (" 40%|####      | 40/100 [00:20<00:30,  2.00it/s]\r 50%|#####     | 50/100 [00:25<00:25,  2.00it/s]", "lora",
     2.0 * 8 * 4096 / 2, "progress bar it/s"),
    (" 50%|#####     | 5/10 [00:25<00:25,  4.00s/it]", "full_ft", 0.25 * 8 * 4096 / 2, "progress bar it/s"),
])
def test_rate_from_log(log, kind, expected, where):
    got = rates.rate_from_log(log, kind=kind, seq_len=4096, global_batch=8, gpus=2)
    assert got[0] == pytest.approx(expected) and got[1] == where


def test_nothing_printed_is_no_rate():
    assert rates.rate_from_log("loss 1.2\n", kind="lora", seq_len=2048, global_batch=8, gpus=1) is None


def _attempt(n, started, step=None, rows=None, ended=None):
    return SimpleNamespace(n=n, started_at=started, ended_at=ended, step=step, rows_done=rows)


def _spec(params, time=None, auto=True):
    return SimpleNamespace(params=params, resources=SimpleNamespace(time=time), resume=SimpleNamespace(auto=auto))


def test_eta_from_the_running_attempt_only():
    spec = _spec({"steps": 1000}, time="1:00:00")
    # attempt 1 reached step 400; attempt 2 resumed there and did 100 steps in 100 s
    attempts = [_attempt(1, 0, step=400, ended=3600), _attempt(2, 4000, step=500)]
    eta = eta_of(spec, attempts, 4100)
    assert eta["rate_per_s"] == 1.0 and eta["remaining_seconds"] == 500 and eta["warning"] is None
    slow = eta_of(spec, [_attempt(1, 1000, step=100)], 2000)  # 0.1 step/s: 9,000 s left, 2,600 s in the limit
    assert slow["remaining_seconds"] == 9000
    assert "reaches its 1:00:00 time limit in 0:43:20" in slow["warning"] and "~2 more segments" in slow["warning"]
    assert "resumes from its last checkpoint" in slow["warning"]
    assert "will not run" in eta_of(_spec({"steps": 1000}, "1:00:00", auto=False), [_attempt(1, 1000, step=100)], 2000)["warning"]


def test_eta_prefers_the_jobs_own_progress_times():
    spec = _spec({"steps": 300}, time="0:01:00")
    # first seen running at t=1012 (status ran late), but the job wrote step 1 at t=1000 and step 25 at t=1012
    points = [(1.0, 1000.0), (10.0, 1004.5), (25.0, 1012.0)]
    eta = eta_of(spec, [_attempt(1, 1012, step=25)], 1012.5, points=points)
    assert eta["rate_per_s"] == 2.0 and eta["remaining_seconds"] == 137.5
    assert "time limit in 0:00:48" in eta["warning"]  # counted from the first point, not from the late sighting
    assert eta_of(spec, [_attempt(1, 1012, step=25)], 1012.5)["rate_per_s"] == 50.0  # what the sighting alone says


def test_no_eta_without_progress_or_total():
    assert eta_of(_spec({"steps": 1000}), [_attempt(1, 1000)], 1100) is None
    assert eta_of(_spec({}), [_attempt(1, 1000, rows=10)], 1100) is None
    rows = eta_of(_spec({}), [_attempt(1, 1000, rows=10)], 1100, total_hint=110)
    assert rows["unit"] == "rows" and rows["remaining_seconds"] == 1000
    assert eta_of(_spec({"steps": 10}), [_attempt(1, 1000, step=5, ended=1050)], 1100) is None  # not running


def test_tuning_set_is_kept_within_the_goal():
    """Training, vLLM and SGLang within the goal. The project's H200 VM ran transformers generate ~2x slower than
    the bare-metal per-op prior (its vCPUs): those five cases are kept, and kept from drifting further."""
    rows = time_eval.score(time_eval.load("tuning"))
    vm = [r for r in rows if r["engine"] == "hf" and r["group"] == "inference"]
    rest = [r for r in rows if r not in vm]
    summary = time_eval.summary(rest)
    assert len(rest) >= 36 and summary["within_1.5x"] >= 0.8 and summary["within_2x"] >= 0.95, time_eval.table(rows)
    assert len(vm) == 5 and all(1.0 < r["ratio"] < 2.5 for r in vm), time_eval.table(rows)


def test_held_out_training_is_within_2x():
    """Training alone within 2x on 95%: 23 of 23 before round 9, 39 of 46 after its torchtune rows, 43 of 46 after
    round 10, 62 of 64 after round 11 (VectorLM's 18 rows; the fsdp prior from fms-fsdp's eager 7B row). Outside:
    torchtune's 2024-05 RTX 4090 full fine-tunes, 1 GPU (2.10, PagedAdamW paging on a 24 GB card) and 4 GPUs (4.33,
    the README's column read as the job's rate). Scored after the constants were frozen; `python
    tests/estimator/time_eval.py` prints every case."""
    rows = time_eval.score(time_eval.load("heldout"))
    training = [r for r in rows if r["group"] == "training"]
    assert len(training) >= 13 and time_eval.summary(training)["within_2x"] >= 0.95, time_eval.table(rows)


def test_held_out_inference_is_within_2x():
    """Inference alone keeps the 2x goal (82 of 84 after round 9; the two outside are throughput reports:
    vllm#8244's 405B FP8 run its reporter calls poor, 2.88x, and vllm#12315's one ShareGPT wave whose longest
    request is not printed, 2.70x; round 11: 96 of 100, the Qwen2-57B-A14B rows on vLLM 0.4.2 at 2.41x and 2.32x)."""
    rows = [r for r in time_eval.score(time_eval.load("heldout")) if r["group"] == "inference"]
    assert len(rows) >= 84 and time_eval.summary(rows)["within_2x"] >= 0.95, time_eval.table(rows)


def test_held_out_is_within_2x_on_95_percent():
    """The issue's 2x goal: met from round 6 to round 8 (85 of 87), lost in round 9 (121 of 130), met again after
    round 10 (125 of 130, 96%) and round 11 (144 of 148, 97%)."""
    rows = time_eval.score(time_eval.load("heldout"))
    assert time_eval.summary(rows)["within_2x"] >= 0.95, time_eval.table(rows)


def test_held_out_counts_do_not_fall_below_round_11():
    """A floor, not the goal: counts (not shares), so that a new case never breaks it and a model change that
    loses a held-out case does. Round 9: 87 of 130 scored within 1.5x, 121 within 2x; round 10: 98 and 125;
    round 11: 119 and 144 of 148 (VectorLM's 18 rows added, then the fsdp prior read from fms-fsdp's eager 7B row),
    then 133 and 158 of 164 (the Qwen2 speed page's 16 rows, scored once, no change after them)."""
    rows = time_eval.score(time_eval.load("heldout"))
    assert sum(r["error"] <= 1.5 for r in rows) >= 133 and sum(r["error"] <= 2.0 for r in rows) >= 158, \
        time_eval.table(rows)


def test_held_out_meets_the_issue_goal():
    """The issue's goal, at least 80% within 1.5x and 95% within 2x: met in round 11, 119 of 148 (80.4%) and 144
    (97.3%) after the fsdp prior, then 133 of 164 (81.1%) and 158 (96.3%) with the Qwen2 page's 16 rows, scored once
    (132 needed). Rounds 6-10 missed the 1.5x goal (75% in round 10). What is still outside 1.5x (31 cases):
    `time_misses.md`, round 11. Constants are not refitted to held-out cases."""
    rows = time_eval.score(time_eval.load("heldout"))
    summary = time_eval.summary(rows)
    assert summary["within_1.5x"] >= 0.8 and summary["within_2x"] >= 0.95, time_eval.table(rows)


def test_held_out_cases_cite_their_source():
    for case in time_eval.load("heldout") + time_eval.load("tuning"):
        assert case["url"].startswith("http") or case["url"] == "measured on an H200 in this project", case["id"]
        assert case["quote"] and case["measured"] > 0


def test_a_decode_all_reduce_costs_its_bytes_at_large_batches():
    """Round 7: a tensor-parallel all-reduce in decode is its latency at batch 1 (a few KiB) and its bytes too at
    256 sequences of a 70B model (4 MiB, 2(n-1)/n of it per GPU over NVLink at the bus bandwidth training uses)."""
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    arch = arch_from_config(resolve_model("Llama-3.1-70B").config)
    h100 = peaks_for("H100-80GB")
    one = decoding.tp_allreduce_s(arch, h100, 4, 1.0)
    assert one == pytest.approx(decoding.TP_ALLREDUCE_S, rel=0.01)
    batch = decoding.tp_allreduce_s(arch, h100, 4, 256.0)
    assert batch - decoding.TP_ALLREDUCE_S == pytest.approx(1.5 * 256 * 8192 * 2 / (450e9 * timing.LINK_EFFICIENCY))


def test_sharded_gradients_are_reduce_scattered():
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    arch = arch_from_config(resolve_model("Llama-3.2-1B").config)
    peaks = peaks_for("RTX-4090")  # PCIe: communication-bound
    kw = dict(kind="full_ft", seq_len=512, micro_batch=1, framework="fsdp")
    est = estimate("Llama-3.2-1B", "full_ft", "RTX-4090", num_gpus=4, seq_len=512, batch=1, suggest=False)
    zero1 = timing.training_rate(est, arch, peaks, zero_stage=1, **kw)
    zero2 = timing.training_rate(est, arch, peaks, zero_stage=2, **kw)
    zero3 = timing.training_rate(est, arch, peaks, zero_stage=3, **kw)
    grads_s = 0.75 * est.params_trainable * 2.0 / (32.0 * timing.LINK_EFFICIENCY * 1e9)  # (n-1)/n of bf16 grads
    # ZeRO-1 all-reduces the gradients (2x on the bus), ZeRO-2 reduce-scatters them (1x); same optimizer shards
    assert zero1.bound == "communication"
    assert zero1.seconds_per_step - zero2.seconds_per_step == pytest.approx(grads_s, rel=0.01)
    # ZeRO-3 adds the two parameter gathers (2 x 2 bytes x (n-1)/n) and hides them behind forward as well
    gathers_s = 2 * 0.75 * est.params_total * 2.0 / (32.0 * timing.LINK_EFFICIENCY * 1e9)
    extra = zero3.seconds_per_step - zero2.seconds_per_step
    assert gathers_s * 0.8 < extra < gathers_s and any("s/step not hidden" in a for a in zero3.assumptions)


def test_a_decode_steps_kv_read_does_not_hide_under_its_gemms():
    """Round 8: the roofline holds per kernel. At 256 sequences of a 70B model the GEMMs are compute-bound and the
    attention kernels' KV-cache read comes on top of them; at batch 1 the step is every byte term, as before."""
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model

    arch = arch_from_config(resolve_model("Llama-3.1-70B").config)
    h100 = peaks_for("H100-80GB")
    est = estimate("Llama-3.1-70B", "inference", "H100-80GB", num_gpus=4, tp=4, max_model_len=4096, suggest=False)
    n_mm = timing.matmul_params(est, arch)
    peak = h100.bf16_tflops * 1e12
    bandwidth = decoding.decode_bandwidth(h100)[0]
    kw = dict(engine="sglang", context=400.0, n_mm=n_mm, peak=peak)  # SGLang: the CPU step hides, the GPU is all
    step, memory_s, compute_s, _cpu = decoding._decode_step(est, arch, h100, concurrency=256.0, **kw)
    weights_s = est.weights_gib * (1 << 30) / bandwidth
    kv_s = 256 * 400 * est.kv_bytes_per_token / 4 / bandwidth
    gemm_s = 256 * 2 * n_mm / 4 / (peak * decoding.PREFILL_EFFICIENCY)
    fixed_s = memory_s - weights_s - kv_s  # all-reduces and graph-kernel latencies
    assert gemm_s > weights_s and fixed_s > 0  # the GEMMs are compute-bound at this batch
    assert step == pytest.approx(gemm_s + kv_s + fixed_s, rel=0.01)  # the attention FLOPs are far below its bytes
    assert step > max(memory_s, compute_s) * 1.1  # round 7's one roofline over the whole step was ~10% shorter
    one, memory_one, _c, _o = decoding._decode_step(est, arch, h100, concurrency=1.0, **kw)
    assert one == pytest.approx(memory_one)  # batch 1: the weights, KV, all-reduces and kernel latencies add up


def test_compile_raises_the_achieved_fraction_of_pytorch_module_frameworks_only():
    """params.compile: x COMPILE_SPEEDUP (68/57, the PyTorch/IBM blog's 7B pair) for frameworks that run PyTorch
    modules; Megatron/NeMo (Transformer Engine) and FP8 runs (whose prior is already a compiled figure) unchanged."""
    kw = dict(seq_len=4096, batch=2)
    eager = rate("Llama-3.2-3B", "full_ft", "A100-80GB", framework="fsdp", **kw)
    compiled = rate("Llama-3.2-3B", "full_ft", "A100-80GB", framework="fsdp", torch_compile=True, **kw)
    assert compiled["efficiency"] / eager["efficiency"] == pytest.approx(timing.COMPILE_SPEEDUP)
    assert compiled["tokens_per_s"] > 1.15 * eager["tokens_per_s"]
    assert any("torch.compile" in a for a in compiled["assumptions"])
    for framework, extra in (("megatron", {}), ("torchtitan", {"precision": "fp8"})):
        est_kw = dict(kw, num_gpus=8, zero_stage=3)
        a = estimate("Llama-3.1-8B", "full_ft", "H100", suggest=False, **est_kw)
        b = estimate("Llama-3.1-8B", "full_ft", "H100", suggest=False, torch_compile=True, **est_kw)
        ta = time_object(a, "Llama-3.1-8B", work={}, framework=framework, **extra)
        tb = time_object(b, "Llama-3.1-8B", work={}, framework=framework, **extra)
        assert ta["tokens_per_s"] == tb["tokens_per_s"], framework


def test_torchao_qlora_pays_its_dequantisation_in_bytes_and_bitsandbytes_its_factor():
    """torchtune's QLoRA (torchao NF4): no x0.6; the weight is dequantized in forward, backward and the recompute,
    ~33 bytes per weight per call eager and 2.5 compiled, at 0.75 of the HBM bandwidth. bitsandbytes keeps x0.6."""
    kw = dict(seq_len=4096, batch=2, grad_checkpointing=True)
    lora = rate("Llama-3.2-3B", "lora", "A100-80GB", torch_compile=True, **kw)
    bnb = rate("Llama-3.2-3B", "qlora", "A100-80GB", torch_compile=True, **kw)
    ao = rate("Llama-3.2-3B", "qlora", "A100-80GB", torch_compile=True, nf4_backend="torchao", **kw)
    ao_eager = rate("Llama-3.2-3B", "qlora", "A100-80GB", nf4_backend="torchao", **kw)
    assert bnb["tokens_per_s"] < 0.65 * lora["tokens_per_s"] < ao["tokens_per_s"] < lora["tokens_per_s"]
    assert ao_eager["tokens_per_s"] < ao["tokens_per_s"] / timing.COMPILE_SPEEDUP
    est = estimate("Llama-3.2-3B", "qlora", "A100-80GB", suggest=False, nf4_backend="torchao", **kw)
    from runjob_core.estimator.arch import arch_from_config
    from runjob_core.estimator.resolve import resolve_model
    arch = arch_from_config(resolve_model("Llama-3.2-3B").config)
    quantized = timing.matmul_params(est, arch) - arch.vocab * arch.hidden
    want = quantized * 33.0 * 3 / (peaks_for("A100-80GB").hbm_gb_s * 1e9 * timing.BANDWIDTH_EFFICIENCY)
    assert timing.nf4_dequant_seconds(est, arch, peaks_for("A100-80GB"), compiled=False, grad_checkpointing=True) == \
        pytest.approx(want)
    assert any("torchao NF4 dequantisation" in a for a in ao_eager["assumptions"])
    assert any("bitsandbytes" in a for a in bnb["assumptions"])


def test_a_job_spec_states_compile_and_the_nf4_backend():
    from runjob_core.config import job_from_mapping
    from runjob_core.errors import RunjobError
    from runjob_core.estimator.time_preflight import time_for_job

    cluster = SimpleNamespace(gpu_type="A100-80GB")
    spec = {"name": "q", "template": "training", "command": "tune run x", "model": {"name": "Llama-3.2-3B"},
            "resources": {"gpus": 1, "gpu_type": "A100-80GB"},
            "params": {"method": "qlora", "seq_len": 4096, "micro_batch_size": 2, "framework": "fsdp"}}
    plain = time_for_job(job_from_mapping(spec, source="q.yaml"), cluster, None)
    stated = time_for_job(job_from_mapping({**spec, "params": {**spec["params"], "compile": True,
                                                               "nf4_backend": "torchao"}}, source="q.yaml"), cluster, None)
    assert stated["tokens_per_s"] > 1.5 * plain["tokens_per_s"]
    for key, bad in (("compile", "yes"), ("nf4_backend", "gptq")):
        with pytest.raises(RunjobError, match=rf"\$\.params\.{key} in q\.yaml"):
            time_for_job(job_from_mapping({**spec, "params": {**spec["params"], key: bad}}, source="q.yaml"), cluster,
                         None)
