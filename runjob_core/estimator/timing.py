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
    :mod:`runjob_core.estimator.decoding`: prefill compute-bound, decode memory-bound or bound by
    the CPU that launches its kernels, by engine. It shares :class:`Rate`, the FLOP counts and
    the eager CPU priors defined here.
"""

from __future__ import annotations

import math

import attrs

from runjob_core.estimator.gpu_peaks import NETWORK_GB_S_PER_GPU, GPUPeaks

#: Achieved fraction of the dense peak (over the FLOPs counted above, recomputation included)
#: by a large dense model at a large micro-batch, per framework. A prior from the public record
#: *outside* the held-out set: Megatron-LM reaches 52% of A100 peak on large GPTs (Narayanan
#: et al. 2021, arXiv:2104.04473), PaLM 46% MFU (Chowdhery et al. 2022), torchtitan and DeepSpeed
#: a little below Megatron, the transformers Trainer (eager modules, separate norm/rotary/activation
#: kernels) below those. PyTorch FSDP (round 11): the FSDP authors' eager Llama-2-7B row (fms-fsdp
#: README at 4ffb9bd, the PyTorch blog "Maximizing training throughput using PyTorch FSDP": 3,700
#: tokens/s per GPU on 128 A100s, no activation checkpointing, batch 2 x 4,096; MFU = HFU 0.57) is
#: 0.508 of peak over this module's FLOP count, 0.555 once its size and micro-batch factors are taken off.
FRAMEWORK_EFFICIENCY = {"megatron": 0.55, "nemo": 0.55, "torchtitan": 0.50, "fsdp": 0.55, "deepspeed": 0.42,
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
#: FP8 training reaches a smaller share of its (twice as large) peak: ~1.4x bf16 end to end. A
#: compiled figure: torchtitan runs its Float8 linears under torch.compile, so compile is not
#: counted again for FP8 runs.
FP8_FACTOR = 0.7
#: ``params.compile`` (torch.compile of the model): inductor fuses the norms, rotary, activation
#: and residual kernels. 68 / 57 = 1.19 from "Maximizing Training Throughput Using PyTorch FSDP and
#: Torch.compile" (Team PyTorch at IBM and Meta, pytorch.org/blog/maximizing-training-throughput):
#: a 7B model on A100s at 57% MFU eager, 68% compiled ("torch.compile improves training MFU between
#: 10% and 23% for various model sizes"). For frameworks that run PyTorch modules only.
COMPILE_SPEEDUP = 68.0 / 57.0
COMPILE_FRAMEWORKS = ("hf", "trl", "axolotl", "llamafactory", "deepspeed", "fsdp", "torchtitan")
#: ``params.nf4_backend: torchao`` (torchtune's QLoRA): torchao's ``LinearNF4`` dequantizes the
#: weight in every forward and again in backward (torchao/dtypes/nf4tensor.py). Bytes moved
#: through HBM per quantized weight per call, counted from ``NF4Tensor.get_original_weight``:
#: eager, two nibble extractions and their int64 casts (2 x 5.5), two ``nf4[index]`` gathers
#: (2 x 5), the expanded scalers (2), two multiplies (2 x 3), ``torch.stack`` (4): ~33; compiled,
#: one fused kernel reading the 0.5-byte data and writing the 2-byte weight: 2.5. bitsandbytes
#: (``bnb``, the default) keeps QLORA_FACTOR.
NF4_DEQUANT_BYTES = {"eager": 33.0, "compiled": 2.5}
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
                        precision: str, *, compiled: bool = False, nf4_backend: str = "bnb") -> tuple[float, list[str]]:
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
    elif kind == "qlora" and nf4_backend == "torchao":
        eff *= LORA_FACTOR
        why.append(f"x {LORA_FACTOR} LoRA adapters (torchao NF4: dequantisation counted in bytes)")
    elif kind == "qlora":
        eff *= LORA_FACTOR * QLORA_FACTOR
        why.append(f"x {LORA_FACTOR * QLORA_FACTOR:.2f} QLoRA NF4 dequantisation (bitsandbytes)")
    if precision == "fp8":
        eff *= FP8_FACTOR
        why.append(f"x {FP8_FACTOR} of the FP8 peak")
    elif compiled and framework in COMPILE_FRAMEWORKS:
        eff *= COMPILE_SPEEDUP
        why.append(f"x {COMPILE_SPEEDUP:.2f} torch.compile")
    return eff, why


def nf4_dequant_seconds(est, arch, peaks: GPUPeaks, *, compiled: bool, grad_checkpointing: bool) -> float:
    """HBM time torchao's NF4 dequantisation adds to one micro-batch: every quantized weight (the decoder
    layers' linears; the LM head stays 16-bit) once in forward, once in backward, once more when recomputed."""
    quantized = max(0.0, matmul_params(est, arch) - arch.vocab * arch.hidden)
    calls = 2 + (1 if grad_checkpointing else 0)
    per_call = NF4_DEQUANT_BYTES["compiled" if compiled else "eager"]
    return quantized * per_call * calls / (peaks.hbm_gb_s * 1e9 * BANDWIDTH_EFFICIENCY)


def _peak_flops(peaks: GPUPeaks, precision: str) -> tuple[float, str]:
    if precision == "fp8" and peaks.fp8_tflops:
        return peaks.fp8_tflops * 1e12, f"FP8 {peaks.fp8_tflops:g}"
    if precision == "fp32":
        return peaks.bf16_tflops * 0.5e12, f"TF32 ~{peaks.bf16_tflops / 2:g}"
    return peaks.bf16_tflops * 1e12, f"BF16 {peaks.bf16_tflops:g}"


def bus_bandwidth(peaks: GPUPeaks, nodes: int = 1) -> tuple[float, str]:
    """Bytes per second an all-reduce moves per GPU (NCCL's bus bandwidth): one way of the link at
    LINK_EFFICIENCY, the network's share per GPU across nodes; and its description."""
    one_way = peaks.link_gb_s / 2 if peaks.link.startswith("NVLink") else peaks.link_gb_s
    if nodes > 1:
        one_way = min(one_way, NETWORK_GB_S_PER_GPU)
        return one_way * LINK_EFFICIENCY * 1e9, f"{NETWORK_GB_S_PER_GPU:g} GB/s network per GPU"
    return one_way * LINK_EFFICIENCY * 1e9, f"{peaks.link} {one_way:g} GB/s one way"


def training_rate(est, arch, peaks: GPUPeaks, *, kind: str, seq_len: int, micro_batch: int, grad_accum: int = 1,
                  framework: str = "hf", grad_checkpointing: bool = False, zero_stage: int = 0, nodes: int = 1,
                  tp: int = 1, precision: str = "bf16", master_weights: bool = True, compiled: bool = False,
                  nf4_backend: str = "bnb") -> Rate:
    """Tokens per second per GPU of one training job."""
    n_mm = matmul_params(est, arch)
    forward = 2.0 * n_mm + attention_flops_forward(arch, seq_len / 2.0)
    passes = 3 if kind == "full_ft" else 2
    if grad_checkpointing:
        passes += 1
    flops_per_token = forward * passes
    tokens_micro = micro_batch * seq_len
    eff, why = training_efficiency(framework, peaks.name, float(est.params_active), tokens_micro, kind, precision,
                                   compiled=compiled, nf4_backend=nf4_backend)
    peak, peak_text = _peak_flops(peaks, precision)
    gpu_seconds = tokens_micro * flops_per_token / tp / (peak * eff)
    dequant = 0.0
    if kind == "qlora" and nf4_backend == "torchao":
        dequant = nf4_dequant_seconds(est, arch, peaks, compiled=compiled, grad_checkpointing=grad_checkpointing) / tp
        gpu_seconds += dequant
    # The eager CPU side launches every layer's kernels (backward from the C++ engine: about
    # as many again); a GPU faster than that waits for it.
    cpu_seconds = arch.layers * EAGER_LAYER_S * (passes + 1) + EAGER_STEP_S
    micro_seconds = max(gpu_seconds, cpu_seconds)
    bound = "overhead" if cpu_seconds > gpu_seconds else "compute"
    step = micro_seconds * grad_accum
    dp = max(1, est.num_gpus // tp)
    bw, bw_text = bus_bandwidth(peaks, nodes)
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
    if dequant:
        how = "compiled: one fused kernel" if compiled else "eager: ~12 unfused ops"
        assumptions.append(f"torchao NF4 dequantisation {dequant * 1e3:.1f} ms per micro-batch ({how}, "
                           f"{NF4_DEQUANT_BYTES['compiled' if compiled else 'eager']:g} B per weight per call)")
    if dp > 1 or tp > 1:
        assumptions.append(f"{dp} data-parallel x {tp} tensor-parallel over {bw_text}: {comm:.3f} s/step not hidden")
    return Rate(tokens_per_s=tokens_per_step / step, bound=bound, assumptions=tuple(assumptions),
                seconds_per_step=step, tokens_per_step=tokens_per_step, efficiency=eff)



def segments_for(total_seconds: float, limit_seconds: float | None) -> int:
    """Resume segments a time limit forces (1 when the work fits in one)."""
    if not limit_seconds or total_seconds <= limit_seconds:
        return 1
    return math.ceil(total_seconds / limit_seconds)
