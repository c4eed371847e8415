"""Inference speed: prefill, the decode step by engine, and a whole job's generated tokens per second.

Prefill is compute-bound. Decode reads the weights (MoE: the experts the batch touches) and the
batch's KV cache every step: memory-bound until the batch is large enough to be compute-bound.
vLLM/SGLang batch continuously up to the concurrency the KV pool holds and replay the layers as a
CUDA graph, whose every kernel costs a few microseconds beyond its bytes. transformers
``generate`` runs one static batch in eager PyTorch: every step costs the Python/kernel-launch
time of every layer, which at small batch is far longer than the weights take to read
(``overhead``-bound). The shared pieces (:class:`Rate`, the FLOP counts, the eager CPU priors)
are :mod:`runjob_core.estimator.timing`'s.
"""

from __future__ import annotations

import math

from runjob_core.estimator.gpu_peaks import GPUPeaks
from runjob_core.estimator.timing import (
    BANDWIDTH_EFFICIENCY,
    EAGER_LAYER_S,
    EAGER_STEP_S,
    Rate,
    attention_flops_forward,
    bus_bandwidth,
    matmul_params,
)

#: Decode reads at timing's BANDWIDTH_EFFICIENCY share of the HBM bandwidth (weight GEMVs and
#: paged attention), on a card whose SMs can keep that much in flight. A decode kernel (a GEMV-shaped weight
#: read, paged attention) keeps a bounded number of bytes in flight per SM, and by Little's law
#: an SM moves at most that over the DRAM latency. The H100 SXM reaches the prior above (0.75 x
#: 3,350 GB/s) with 132 SMs: ~19 GB/s per SM. A card with much more HBM per SM cannot fill its
#: HBM at decode: the H20 (78 SMs for 4.0 TB/s, a cut-down GH100) reaches ~1.5 TB/s, the H200 and
#: GH200 (the H100's 132 SMs for 4.8 / 4.0 TB/s) ~2.5 TB/s. NVIDIA's own TensorRT-LLM table shows
#: the H200 within 4% of the H100 on decode-heavy Mistral-7B runs despite 43% more bandwidth
#: (TensorRT-LLM#1570). Derived from the H100's spec and the prior, not fitted to any case.
DECODE_GB_S_PER_SM = BANDWIDTH_EFFICIENCY * 3350.0 / 132
#: Share of peak for prefill and for compute-bound decode batches.
PREFILL_EFFICIENCY = 0.5
#: vLLM/SGLang CPU work per step and per running sequence: scheduling, building the step's
#: input tensors, the sampler (outside the CUDA graph that replays the layers, so no per-layer
#: launch cost) and detokenisation. vLLM's V0 engine does it *between* forward passes: the GPU
#: waits, so it adds to the step (``ENGINE_SERIAL``). SGLang's overlap scheduler (default since
#: 0.4) prepares step n+1 while step n runs: it hides behind the GPU time. 1.5 ms: sized on the
#: tuning set together with GRAPH_KERNEL_S (round 6; rounds 4-5 had 2.5 ms with no kernel cost, which
#: read SGLang's small and MoE models 1.5-2.4x too fast on the H20).
ENGINE_STEP_S = 1.5e-3
ENGINE_SERIAL = {"vllm": True, "sglang": False}
ENGINE_PER_SEQ_S = 10e-6
#: transformers' eager MoE block (Mixtral/Qwen2-MoE/Qwen3-MoE ``SparseMoeBlock.forward``) runs a
#: Python loop over experts; one iteration: ``expert_mask[i]``, ``torch.where`` (a nonzero, which
#: syncs the CPU with the GPU), the row gather and reshape, the expert module with its three Linear
#: modules, the activation and product, the routing-weight index and multiply, ``.to`` and
#: ``index_add_``: ~20 dispatches. Before transformers 4.52 (Mixtral, Qwen2-MoE: PR #32429) and 4.53
#: (Qwen3-MoE: PR #38133) the loop runs over *every* expert, since then over the experts the batch
#: routes to. An expert no token chose runs the same Python on empty tensors: no kernel is launched.
EXPERT_LOOP_OPS = 20
#: ~60 aten dispatches and ~12 module calls per eager decoder layer (EAGER_LAYER_S above): the
#: per-op cost the prior implies, launch included.
EAGER_OPS_PER_LAYER = 72
#: An op on an empty tensor pays the Python binding and the dispatcher but launches no kernel:
#: about a third of the per-op prior (the CUDA launch and the argument checks of a real kernel are
#: the rest).
EAGER_EMPTY_OP_S = 5e-6
#: A CUDA-graph decode step (vLLM, SGLang) runs every layer's kernels one after the other, and each
#: costs GPU time beyond the bytes it reads: the launch of the next graph node, the ramp-up and tail
#: of a small grid, its first DRAM round trip. Kernels per dense decoder layer, counted from the
#: engines' model code (sglang/srt/models/qwen2.py / llama.py, vllm/model_executor/models/llama.py,
#: at decode): fused add+RMSNorm x2, qkv GEMM, rotary, KV-cache store, attention, o_proj, gate_up
#: GEMM, SiLU-and-mul, down GEMM, ~12 with the attention's split/merge; q/k RMSNorm (Qwen3,
#: OLMo-2) adds 2. A MoE layer's MLP is the router GEMM, top-k softmax, the block align/sort, two
#: grouped GEMMs, SiLU-and-mul and the weighted sum: 4 more than a dense MLP.
GRAPH_KERNELS_PER_LAYER = 12
GRAPH_KERNELS_QK_NORM = 2
GRAPH_KERNELS_MOE_EXTRA = 4
#: GPU seconds each graph kernel adds beyond its bytes. Sized on the tuning set (round 6: the 16
#: SGLang batch-1 H20 runs and the 12 vLLM batch-1 A100 runs together leave 2-6 us per kernel above
#: the weight reads; none of the held-out cases), the same on every card: it is latency, not bandwidth.
GRAPH_KERNEL_S = 4e-6
#: A tensor-parallel all-reduce per attention and per MLP block in decode, on the GPU's critical path
#: (no scheduler overlap hides it): this latency (custom all-reduce or NCCL LL) plus its bytes
#: (:func:`tp_allreduce_s`).
TP_ALLREDUCE_S = 10e-6


def tp_allreduce_s(arch, peaks: GPUPeaks, tp: int, sequences: float, act_bytes: float = 2.0) -> float:
    """Seconds of one decode all-reduce of *sequences* hidden vectors across *tp* GPUs.

    The latency above, plus the bytes: vLLM's custom all-reduce (csrc/custom_all_reduce.cuh) moves
    a message past its one-shot size two-shot, a reduce-scatter then an all-gather, and NCCL's ring
    moves the same, 2(n-1)/n of the message per GPU (nccl-tests' PERFORMANCE.md: the all-reduce bus
    bandwidth) at the bus bandwidth training's tensor parallelism uses. At batch 1 the message is a
    few KiB and the latency is all; at 256 sequences of a 70B model (4 MiB) the bytes cost ~17 us
    more on NVLink 4 (round 7, ``tests/estimator/data/time_misses.md``)."""
    message = sequences * arch.hidden * act_bytes
    return TP_ALLREDUCE_S + 2.0 * (tp - 1) / tp * message / bus_bandwidth(peaks)[0]


def decode_bandwidth(peaks: GPUPeaks) -> tuple[float, str]:
    """Bytes per second a decode step reads at: the prior share of HBM, capped by the SMs."""
    hbm = peaks.hbm_gb_s * BANDWIDTH_EFFICIENCY
    if peaks.sms and peaks.sms * DECODE_GB_S_PER_SM < hbm:
        capped = peaks.sms * DECODE_GB_S_PER_SM
        return capped * 1e9, (f"decode reads at {capped:,.0f} GB/s: {peaks.sms} SMs x {DECODE_GB_S_PER_SM:.0f} GB/s in "
                              f"flight per SM ({capped / peaks.hbm_gb_s:.2f} of the HBM)")
    return hbm * 1e9, f"decode reads at {BANDWIDTH_EFFICIENCY:g} of HBM"


def experts_routed(arch, tokens: float) -> float:
    """Distinct experts per MoE layer that *tokens* tokens route to (top-k of n, uniform routing)."""
    n, k = arch.n_experts, max(1, arch.experts_per_token)
    return n * (1.0 - (1.0 - k / n) ** max(1.0, tokens))


def hf_moe_loop_s(arch, batch: float, loop_all: bool) -> float:
    """CPU seconds per decode step of transformers' per-expert Python loop, over every MoE layer."""
    if not arch.is_moe:
        return 0.0
    per_op = EAGER_LAYER_S / EAGER_OPS_PER_LAYER
    routed = experts_routed(arch, batch)
    empty = (arch.n_experts - routed) if loop_all else 0.0
    return arch.n_moe_layers * EXPERT_LOOP_OPS * (routed * per_op + empty * EAGER_EMPTY_OP_S)


def hf_loops_all_experts(arch, transformers_version: str | None) -> bool:
    """Whether transformers *transformers_version* loops over every expert (before 4.52/4.53)."""
    if not arch.is_moe or not transformers_version:
        return False
    parts = []
    for piece in str(transformers_version).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    fixed = (4, 53) if arch.model_type == "qwen3_moe" else (4, 52)
    return tuple(parts + [0] * (2 - len(parts))) < fixed


def _hf_moe_loop_text(arch, batch: float, loop_all: bool, transformers_version: str | None) -> str:
    looped = f"all {arch.n_experts}" if loop_all else f"the ~{experts_routed(arch, batch):.0f} routed"
    why = (f"{EAGER_EMPTY_OP_S * 1e6:g} us per op on an unrouted expert's empty tensors; transformers "
           f"{transformers_version} predates the routed-only loop" if loop_all else
           "transformers >= 4.53 assumed, older ones loop over every expert: set params.transformers_version")
    return (f"the MoE block loops in Python over {looped} experts of each of {arch.n_moe_layers} layers "
            f"({EXPERT_LOOP_OPS} dispatches each; {why})")


def graph_kernels(arch) -> int:
    """Kernels one CUDA-graph decode step runs (every layer, one after the other)."""
    per_layer = GRAPH_KERNELS_PER_LAYER + (GRAPH_KERNELS_QK_NORM if arch.qk_norm != "none" else 0)
    return arch.layers * per_layer + (arch.n_moe_layers * GRAPH_KERNELS_MOE_EXTRA if arch.is_moe else 0)


def _moe_bytes_touched(est, batch: float) -> float:
    """Weight bytes one decode step reads per GPU: a MoE batch touches more experts as it grows."""
    weights = est.weights_gib * (1 << 30)
    if est.params_active >= est.params_total:
        return weights
    share = est.params_active / est.params_total
    return weights * (1.0 - (1.0 - share) ** max(1.0, batch))


def _decode_step(est, arch, peaks: GPUPeaks, *, engine: str, concurrency: float, context: float, n_mm: float,
                 peak: float, moe_loop_all: bool = False) -> tuple[float, float, float, float]:
    """One decode step of *concurrency* sequences: (seconds, weights+KV read, compute, CPU overhead).

    The step's kernels run one after another on one stream (vLLM ``models/llama.py``
    ``LlamaAttention.forward``: ``qkv_proj``, ``rotary_emb``, ``attn``, ``o_proj``, then the MLP; one
    CUDA graph), and the roofline holds per kernel: the GEMMs take max(weight bytes, their FLOPs)
    (they share one arithmetic intensity, the batch), the attention kernels max(KV bytes, their
    FLOPs), and the all-reduces and per-kernel latencies their own time. A KV-cache read does not
    hide under the GEMMs' tensor-core time (round 8, ``tests/estimator/data/time_misses.md``)."""
    tp = max(1, est.tp)
    if engine in ("vllm", "sglang"):
        overhead = ENGINE_STEP_S + ENGINE_PER_SEQ_S * concurrency
    else:
        overhead = arch.layers * EAGER_LAYER_S + EAGER_STEP_S + hf_moe_loop_s(arch, concurrency, moe_loop_all)
    kv_read = concurrency * context * est.kv_bytes_per_token / tp
    if engine == "hf":
        kv_read *= 3.0  # DynamicCache grows by torch.cat: the cache is read, and copied, every step
    bandwidth = decode_bandwidth(peaks)[0]
    weights_s = _moe_bytes_touched(est, concurrency) / bandwidth
    kv_s = kv_read / bandwidth
    gemm_s = concurrency * 2.0 * n_mm / tp / (peak * PREFILL_EFFICIENCY)
    attention_s = concurrency * attention_flops_forward(arch, context) / tp / (peak * PREFILL_EFFICIENCY)
    fixed = 0.0
    if engine in ("vllm", "sglang"):
        fixed += graph_kernels(arch) * GRAPH_KERNEL_S
    if tp > 1:  # two all-reduces per layer, on the GPU between the weight reads
        fixed += 2 * arch.layers * tp_allreduce_s(arch, peaks, tp, concurrency)
    gpu_s = max(weights_s, gemm_s) + max(kv_s, attention_s) + fixed
    memory_s = weights_s + kv_s + fixed
    compute_s = gemm_s + attention_s
    if ENGINE_SERIAL.get(engine):
        return gpu_s + overhead, memory_s, compute_s, overhead
    return max(gpu_s, overhead), memory_s, compute_s, overhead


def inference_rate(est, arch, peaks: GPUPeaks, *, engine: str, input_tokens: float, output_tokens: float,
                   batch: int, rows: float | None = None, max_num_seqs: int = 256,
                   longest_output_tokens: float | None = None, transformers_version: str | None = None) -> Rate:
    """Generated tokens per second of the whole job (all replicas, prefill included).

    *output_tokens* is the mean generated length; *longest_output_tokens* the longest row's
    (a ``max_tokens`` cap some rows reach). A static ``generate`` batch runs until its longest
    row ends, every batch; a vLLM/SGLang job refills its slots, so only the last rows run on
    alone, at the short step of a nearly empty batch.
    """
    tp = max(1, est.tp)
    replicas = max(1, est.num_gpus // tp)
    n_mm = matmul_params(est, arch)
    peak = peaks.bf16_tflops * 1e12
    if est.dtype == "fp8" and peaks.fp8_tflops:
        peak = peaks.fp8_tflops * 1e12
    mean_out = max(1.0, output_tokens)
    longest = max(mean_out, longest_output_tokens or mean_out)
    context = input_tokens + output_tokens / 2.0
    assumptions = [f"peak BF16 {peaks.bf16_tflops:g} TFLOPS dense, HBM {peaks.hbm_gb_s:g} GB/s ({peaks.name})"]
    if engine in ("vllm", "sglang"):
        fits = est.kv_capacity_tokens / max(1.0, input_tokens + output_tokens / 2.0) if est.kv_capacity_tokens else batch
        concurrency = max(1.0, min(float(max_num_seqs), fits))
        if rows is not None:
            concurrency = max(1.0, min(concurrency, rows / replicas))
        what = f"{engine} continuous batching at {concurrency:,.0f} sequences (KV pool {est.kv_capacity_tokens:,} tokens)"
        prefill_eff = PREFILL_EFFICIENCY
    else:
        concurrency = float(max(1, batch))
        what = (f"transformers generate, static batch {concurrency:g}, eager: {EAGER_LAYER_S * 1e3:g} ms CPU per layer "
                f"+ {EAGER_STEP_S * 1e3:g} ms per step (a slower host CPU, e.g. a cloud VM, up to ~2x slower)")
        prefill_eff = PREFILL_EFFICIENCY * 0.8
    loop_all = engine == "hf" and hf_loops_all_experts(arch, transformers_version)
    if engine == "hf" and arch.is_moe:
        what += "; " + _hf_moe_loop_text(arch, concurrency, loop_all, transformers_version)
    step, memory_s, compute_s, overhead = _decode_step(est, arch, peaks, engine=engine, concurrency=concurrency,
                                                       context=context, n_mm=n_mm, peak=peak, moe_loop_all=loop_all)
    bound = "overhead" if overhead >= max(memory_s, compute_s) else ("memory" if memory_s >= compute_s else "compute")
    # One replica's share of the rows (a full batch when the row count is unknown): its prefill,
    # then its decode steps, tail included.
    per_replica = rows / replicas if rows is not None else concurrency
    prefill_per_token = (2.0 * n_mm + attention_flops_forward(arch, input_tokens / 2.0)) / tp / (peak * prefill_eff)
    prefill_s = per_replica * input_tokens * prefill_per_token
    if engine in ("vllm", "sglang"):
        tail_step = _decode_step(est, arch, peaks, engine=engine, concurrency=1.0, context=context, n_mm=n_mm,
                                 peak=peak)[0]
        decode_s = per_replica * mean_out / concurrency * step + (longest - mean_out) * tail_step
    else:
        decode_s = math.ceil(per_replica / concurrency) * longest * step
    if prefill_s > decode_s:
        bound = "compute"
    rate = replicas * per_replica * mean_out / (prefill_s + decode_s)
    assumptions += [what, f"decode step {step * 1e3:.1f} ms, kernel by kernel: weights+KV {memory_s * 1e3:.1f} ms "
                          f"({decode_bandwidth(peaks)[1]}{', tp all-reduces included' if tp > 1 else ''}), "
                          f"compute {compute_s * 1e3:.1f} ms, overhead {overhead * 1e3:.1f} ms"
                          f"{' (between forward passes: added)' if ENGINE_SERIAL.get(engine) else ''}",
                    f"prefill compute-bound at {prefill_eff:g} of peak; {input_tokens:g} in + {output_tokens:g} out tokens "
                    f"per row; {replicas} replica(s) x tp {tp}"]
    if longest > mean_out:
        assumptions.append(f"the longest row generates {longest:g} tokens: "
                           + ("every static batch runs until it ends" if engine == "hf"
                              else "the last rows run on alone at the end"))
    return Rate(tokens_per_s=rate, bound=bound, assumptions=tuple(assumptions), efficiency=None,
                seconds_per_step=step)
