"""How fast a job runs, from first principles: FLOPs and bytes against the GPU's peaks.

Reads the memory model only through its public result (:class:`MemoryEstimate`: parameter
counts, weights per GPU, KV bytes per token, KV capacity) and the architecture
(:func:`arch_from_config`); the peaks come from :mod:`runjob_core.estimator.gpu_peaks`.

Training (tokens per second per GPU)
    FLOPs per token = forward x passes. Forward = 2 x the matmul parameters (active ones for
    MoE; the embedding lookup is no matmul, a tied LM head is) + the causal attention term
    2 x seq_len x q_dim per layer. Passes: full fine-tuning 3 (forward, activation gradients,
    weight gradients); LoRA/QLoRA 2 (the frozen base has no weight gradients); activation
    checkpointing adds one forward. Time = FLOPs / (peak x achieved fraction), the fraction a
    *prior* (:func:`training_efficiency`), never fitted to the held-out set. Data parallel
    adds the gradient all-reduce (ZeRO-3/FSDP: the parameter gathers too) that backward does
    not hide; the step cannot be faster than the eager CPU side that launches its kernels.

Inference (generated tokens per second of the whole job, prefill included)
    Prefill is compute-bound. Decode reads the weights (MoE: the experts the batch touches)
    and the batch's KV cache every step: memory-bound until the batch is large enough to be
    compute-bound. vLLM/SGLang batch continuously up to the concurrency the KV pool holds.
    transformers ``generate`` runs one static batch in eager PyTorch: every step costs the
    Python/kernel-launch time of every layer, which at small batch is far longer than the
    weights take to read (``overhead``-bound).
"""

from __future__ import annotations

import math

import attrs

from runjob_core.estimator.gpu_peaks import NETWORK_GB_S_PER_GPU, GPUPeaks

#: Achieved fraction of the dense peak (over the FLOPs counted above, recomputation included)
#: by a large dense model at a large micro-batch, per framework. A prior from the public record
#: *outside* the held-out set: Megatron-LM reaches 52% of A100 peak on large GPTs (Narayanan
#: et al. 2021, arXiv:2104.04473), PaLM 46% MFU (Chowdhery et al. 2022), torchtitan/FSDP2
#: and DeepSpeed a little below Megatron, the transformers Trainer (eager modules, separate
#: norm/rotary/activation kernels) below those.
FRAMEWORK_EFFICIENCY = {"megatron": 0.55, "nemo": 0.55, "torchtitan": 0.50, "fsdp": 0.45, "deepspeed": 0.42,
                        "hf": 0.40, "trl": 0.40, "axolotl": 0.40, "llamafactory": 0.40, "unsloth": 0.45}
#: The transformers Trainer family (eager modules, unfused norm/rotary/activation kernels) keeps
#: the same overheads on a card three times faster than an A100: a smaller share of its peak.
#: FSDP stacks with fused kernels (llm-foundry in the tuning set: 40-46% MFU on H100) do not.
HOPPER_EAGER_FACTOR = 0.8
EAGER_FRAMEWORKS = ("hf", "trl", "axolotl", "llamafactory", "deepspeed")
HOPPER = ("H100-80GB", "H200", "GH200", "H20")
#: LoRA adapters are separate small matmuls (rank r) with their own dropout: ~15% off in PEFT.
LORA_FACTOR = 0.85
#: QLoRA dequantises every NF4 weight in every forward and backward (bitsandbytes): ~40% slower
#: than 16-bit LoRA in the QLoRA paper's own timings (Dettmers et al. 2023, arXiv:2305.14314).
QLORA_FACTOR = 0.6
#: FP8 training reaches a smaller share of its (twice as large) peak: ~1.4x bf16 end to end.
FP8_FACTOR = 0.7
#: Sizes below ~1B parameters leave the tensor cores idle between small GEMMs: N / (N + this).
SIZE_HALF_POINT = 0.4e9
#: Tokens per micro-batch below ~256 do the same: T / (T + this).
TOKENS_HALF_POINT = 256
#: Eager PyTorch + transformers modules, CPU time per decoder layer per forward. Counted from
#: transformers' eager decoder layer (LlamaDecoderLayer/Qwen2DecoderLayer with sdpa): two
#: RMSNorms of 8 aten ops each, 3 q/k/v projections and their view/transpose (9), rotary
#: embedding of q and k (slices, neg, cat, 2 mul, add: ~16), the cache update (2 cat), sdpa and
#: its reshape (~4), o_proj, the MLP (gate, up, act, mul, down), 2 residual adds: ~60 dispatches
#: plus ~12 nn.Module calls, at ~15 us each (Python binding + dispatcher + CUDA launch) on a
#: bare-metal server core. A round 1 prior of 0.5 ms missed the project's H200 VM (tuning set)
#: 3.4-3.8x; that VM's vCPUs cost ~2x this prior again (the README says so), not a constant
#: to fit: a job on such a host runs up to ~2x slower than this estimate.
EAGER_LAYER_S = 1.0e-3
#: Per generate step outside the layers: embedding, rotary tables, mask, final norm, LM head,
#: the logits processors and sampling, the input_ids/attention-mask/cache-position updates and
#: the stopping check whose ``.max() == 0`` syncs CPU and GPU every step (~100 dispatches),
#: transformers.generation.utils ``_sample``.
EAGER_STEP_S = 3.0e-3
#: Achieved share of HBM bandwidth by decode (weight GEMVs and paged attention).
BANDWIDTH_EFFICIENCY = 0.75
#: ... on a card whose SMs can keep that much in flight. A decode kernel (a GEMV-shaped weight
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
#: A tensor-parallel all-reduce per attention and per MLP block in decode: a small message, latency
#: bound (custom all-reduce or NCCL LL), on the GPU's critical path (no scheduler overlap hides it).
TP_ALLREDUCE_S = 10e-6
#: NCCL reaches ~80% of a link's one-way bandwidth in a large all-reduce.
LINK_EFFICIENCY = 0.8
#: Share of the communication DDP/FSDP overlap with the compute that can hide it: the backward
#: pass for DDP's gradient all-reduce (buckets go out as their gradients are ready); forward and
#: backward for ZeRO-3/FSDP, which prefetch the next layer's parameter all-gather while the
#: current layer computes (FSDP2's implicit prefetch, FSDP1 ``forward_prefetch``/``backward_prefetch``,
#: DeepSpeed's ``stage3_prefetch_bucket_size``). Volumes per the ZeRO paper (Rajbhandari et al. 2020,
#: arXiv:1910.02054, section 7): DDP all-reduces the gradients (2 x their size on the bus),
#: ZeRO-2/3 reduce-scatter them (1x) and ZeRO-3 all-gathers the parameters in forward and backward
#: (2x): 3x in all against DDP's 2x.
OVERLAP = 0.7


@attrs.frozen
class Rate:
    """What the model says about speed, before any amount of work is known."""

    tokens_per_s: float
    bound: str
    assumptions: tuple[str, ...]
    seconds_per_step: float | None = None
    tokens_per_step: float | None = None
    efficiency: float | None = None


def matmul_params(est, arch) -> float:
    """Active parameters that take part in a matmul per token (no embedding lookup)."""
    embedding = 0 if arch.tie_embeddings else arch.vocab * arch.hidden
    return max(1.0, float(est.params_active) - embedding)


def attention_flops_forward(arch, attended: float) -> float:
    """QK^T and AV per token per forward when the token attends to *attended* earlier tokens
    (causal over a sequence of s tokens: s / 2 on average)."""
    return 4.0 * attended * arch.q_dim * arch.layers


def training_efficiency(framework: str, gpu: str, params: float, tokens_per_micro_batch: int, kind: str,
                        precision: str) -> tuple[float, list[str]]:
    """The prior fraction of peak, and the reasons, one short string each."""
    base = FRAMEWORK_EFFICIENCY.get(framework, FRAMEWORK_EFFICIENCY["hf"])
    size = params / (params + SIZE_HALF_POINT)
    tokens = tokens_per_micro_batch / (tokens_per_micro_batch + TOKENS_HALF_POINT)
    eff = base * size * tokens
    why = [f"{framework} prior {base:.2f} x size {size:.2f} x micro-batch {tokens:.2f}"]
    if gpu in HOPPER and framework in EAGER_FRAMEWORKS:
        eff *= HOPPER_EAGER_FACTOR
        why.append(f"x {HOPPER_EAGER_FACTOR} on Hopper (eager kernels)")
    if kind == "lora":
        eff *= LORA_FACTOR
        why.append(f"x {LORA_FACTOR} LoRA adapters")
    elif kind == "qlora":
        eff *= LORA_FACTOR * QLORA_FACTOR
        why.append(f"x {LORA_FACTOR * QLORA_FACTOR:.2f} QLoRA NF4 dequantisation")
    if precision == "fp8":
        eff *= FP8_FACTOR
        why.append(f"x {FP8_FACTOR} of the FP8 peak")
    return eff, why


def _peak_flops(peaks: GPUPeaks, precision: str) -> tuple[float, str]:
    if precision == "fp8" and peaks.fp8_tflops:
        return peaks.fp8_tflops * 1e12, f"FP8 {peaks.fp8_tflops:g}"
    if precision == "fp32":
        return peaks.bf16_tflops * 0.5e12, f"TF32 ~{peaks.bf16_tflops / 2:g}"
    return peaks.bf16_tflops * 1e12, f"BF16 {peaks.bf16_tflops:g}"


def _bus_bandwidth(peaks: GPUPeaks, nodes: int) -> tuple[float, str]:
    one_way = peaks.link_gb_s / 2 if peaks.link.startswith("NVLink") else peaks.link_gb_s
    if nodes > 1:
        one_way = min(one_way, NETWORK_GB_S_PER_GPU)
        return one_way * LINK_EFFICIENCY * 1e9, f"{NETWORK_GB_S_PER_GPU:g} GB/s network per GPU"
    return one_way * LINK_EFFICIENCY * 1e9, f"{peaks.link} {one_way:g} GB/s one way"


def training_rate(est, arch, peaks: GPUPeaks, *, kind: str, seq_len: int, micro_batch: int, grad_accum: int = 1,
                  framework: str = "hf", grad_checkpointing: bool = False, zero_stage: int = 0, nodes: int = 1,
                  tp: int = 1, precision: str = "bf16", master_weights: bool = True) -> Rate:
    """Tokens per second per GPU of one training job."""
    n_mm = matmul_params(est, arch)
    forward = 2.0 * n_mm + attention_flops_forward(arch, seq_len / 2.0)
    passes = 3 if kind == "full_ft" else 2
    if grad_checkpointing:
        passes += 1
    flops_per_token = forward * passes
    tokens_micro = micro_batch * seq_len
    eff, why = training_efficiency(framework, peaks.name, float(est.params_active), tokens_micro, kind, precision)
    peak, peak_text = _peak_flops(peaks, precision)
    gpu_seconds = tokens_micro * flops_per_token / tp / (peak * eff)
    # The eager CPU side launches every layer's kernels (backward from the C++ engine: about
    # as many again); a GPU faster than that waits for it.
    cpu_seconds = arch.layers * EAGER_LAYER_S * (passes + 1) + EAGER_STEP_S
    micro_seconds = max(gpu_seconds, cpu_seconds)
    bound = "overhead" if cpu_seconds > gpu_seconds else "compute"
    step = micro_seconds * grad_accum
    dp = max(1, est.num_gpus // tp)
    bw, bw_text = _bus_bandwidth(peaks, nodes)
    comm = 0.0
    if dp > 1:
        grad_bytes = 4.0 if (framework in ("hf", "trl", "axolotl") and master_weights and kind == "full_ft") else 2.0
        # DDP/ZeRO-1 all-reduce the gradients (2 (n-1)/n of them on the bus); ZeRO-2/3 and FSDP
        # reduce-scatter them ((n-1)/n: each rank keeps its shard)
        shards_grads = zero_stage >= 2
        volume = (1.0 if shards_grads else 2.0) * (dp - 1) / dp * est.params_trainable * grad_bytes
        hidden_by = micro_seconds * 2.0 / 3.0  # the backward pass
        if zero_stage >= 3:
            volume += 2.0 * (dp - 1) / dp * est.params_total * 2.0  # gathers in forward and backward
            hidden_by = micro_seconds  # FSDP/ZeRO-3 prefetch the next layer's gather in forward too
        comm = max(0.0, volume / bw - OVERLAP * hidden_by)
    if tp > 1:  # Megatron-style: 4 all-reduces of the activations per layer, on the critical path
        comm += grad_accum * 4 * arch.layers * 2.0 * (tp - 1) / tp * tokens_micro * arch.hidden * 2.0 / bw
    # The optimizer step reads and writes ~16 bytes of state per trainable parameter per GPU.
    shards = dp if zero_stage >= 1 else 1
    optimizer = est.params_trainable / tp / shards * 16.0 / (peaks.hbm_gb_s * 1e9 * BANDWIDTH_EFFICIENCY)
    step += comm + optimizer
    if comm > 0.3 * step:
        bound = "communication"
    tokens_per_step = tokens_micro * grad_accum / tp
    counted = f"{passes} passes x {forward / 1e9:.1f} GFLOP/token"
    assumptions = [f"peak {peak_text} TFLOPS dense ({peaks.name})", f"efficiency {eff:.2f} assumed ({'; '.join(why)})",
                   f"counted {counted} ({'LoRA: no base weight gradients' if kind != 'full_ft' else 'full fine-tuning'}"
                   f"{', +1 forward for activation checkpointing' if grad_checkpointing else ''}, attention at {seq_len} tokens)"]
    if dp > 1 or tp > 1:
        assumptions.append(f"{dp} data-parallel x {tp} tensor-parallel over {bw_text}: {comm:.3f} s/step not hidden")
    return Rate(tokens_per_s=tokens_per_step / step, bound=bound, assumptions=tuple(assumptions),
                seconds_per_step=step, tokens_per_step=tokens_per_step, efficiency=eff)


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
    """One decode step of *concurrency* sequences: (seconds, weights+KV read, compute, CPU overhead)."""
    tp = max(1, est.tp)
    if engine in ("vllm", "sglang"):
        overhead = ENGINE_STEP_S + ENGINE_PER_SEQ_S * concurrency
    else:
        overhead = arch.layers * EAGER_LAYER_S + EAGER_STEP_S + hf_moe_loop_s(arch, concurrency, moe_loop_all)
    kv_read = concurrency * context * est.kv_bytes_per_token / tp
    if engine == "hf":
        kv_read *= 3.0  # DynamicCache grows by torch.cat: the cache is read, and copied, every step
    memory_s = (_moe_bytes_touched(est, concurrency) + kv_read) / decode_bandwidth(peaks)[0]
    if engine in ("vllm", "sglang"):
        memory_s += graph_kernels(arch) * GRAPH_KERNEL_S
    if tp > 1:  # two all-reduces per layer, on the GPU between the weight reads
        memory_s += 2 * arch.layers * TP_ALLREDUCE_S
    compute_s = concurrency * (2.0 * n_mm + attention_flops_forward(arch, context)) / tp / (peak * PREFILL_EFFICIENCY)
    if ENGINE_SERIAL.get(engine):
        return max(memory_s, compute_s) + overhead, memory_s, compute_s, overhead
    return max(memory_s, compute_s, overhead), memory_s, compute_s, overhead


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
    assumptions += [what, f"decode step {step * 1e3:.1f} ms: weights+KV {memory_s * 1e3:.1f} ms "
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


def segments_for(total_seconds: float, limit_seconds: float | None) -> int:
    """Resume segments a time limit forces (1 when the work fits in one)."""
    if not limit_seconds or total_seconds <= limit_seconds:
        return 1
    return math.ceil(total_seconds / limit_seconds)
