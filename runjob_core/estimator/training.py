"""GPU memory of fine-tuning: full, LoRA and QLoRA, with ZeRO/FSDP sharding, offload and optimizers.

Model states (weights, gradients, optimizer states; sharded by ZeRO stage / FSDP over
``num_gpus`` as in Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", arXiv:1910.02054, section 3.1 and 5) + activations
(:func:`runjob_core.estimator.arch.activation_bytes_per_token_layer`, after Korthikanti et al.
2022) + the loss's logits + CUDA context and allocator slack. Called by
:func:`runjob_core.estimator.memory.estimate`.
"""

from __future__ import annotations

from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.estimator.arch import (
    Arch,
    activation_bytes_per_token_layer,
    default_lora_targets,
    kv_bytes_per_token,
    lora_modules,
)
from runjob_core.estimator.gpus import GIB, GPUSpec
from runjob_core.estimator.constants import (
    ALLOCATOR_SLACK,
    CUDA_CONTEXT_GIB,
    DTYPE_BYTES,
    LORA_DTYPES,
    OPTIMIZER_ALIASES,
    OPTIMIZERS,
)
from runjob_core.estimator.record import Ctx, MemoryEstimate, gib, nf4_weight_bytes, settings_of
from runjob_core.estimator.zero_buffers import master_step_bytes, reduce_bucket_bytes



#: Chunks of torchtune's CEWithChunkedOutputLoss / LinearCrossEntropyLoss (``num_output_chunks``).
LOSS_CHUNKS = 8


def logits_bytes(tokens: int, vocab: int, act_b: float, loss: str, compiled: bool = False) -> float:
    """Peak bytes of the output logits, the loss and its gradient.

    ``standard`` (transformers' ForCausalLMLoss, torch CrossEntropyLoss on the whole output):
    the 16-bit logits, their fp32 upcast (``logits.float()``), the fp32 log-softmax
    cross_entropy keeps for backward, then an fp32 gradient and its 16-bit cast:
    ``vocab x tokens x (2 + 4 + 4 + 2)``. ``chunked`` (torchtune's
    ``CEWithChunkedOutputLoss``: the output projection runs on 8 chunks and each chunk is
    upcast inside the loss): the 16-bit logits and the saved fp32 log-softmax of every chunk
    stay, the fp32 upcast and gradient exist for one chunk at a time:
    ``2 + 4 + (4 + 4) / 8``. ``fused`` (a fused linear + cross entropy: torchtune's
    ``LinearCrossEntropyLoss``, Liger's ``FusedLinearCrossEntropy``, Apple's Cut Cross
    Entropy): no full logits tensor, one chunk's worth of the standard figure.

    ``compiled`` (torch.compile of the loss, as torchtune's ``compile: True`` does with
    ``training.compile_loss``): inductor fuses the upcast, log-softmax and NLL into one
    kernel that saves only its 16-bit input and a per-row log-sum-exp, so the fp32 copies
    are gone; the fp32 gradient remains (whole, or one chunk at a time when chunked).
    """
    if compiled and loss != "fused":
        per = act_b + (4.0 / LOSS_CHUNKS if loss == "chunked" else 4.0)
    else:
        per = {"standard": act_b + 10.0, "chunked": act_b + 4.0 + 8.0 / LOSS_CHUNKS,
               "fused": (act_b + 10.0) / LOSS_CHUNKS}[loss]
    return tokens * vocab * per


def _largest_param(a: Arch, counts: dict[str, int]) -> float:
    """Parameters of the largest single tensor: the embedding, the LM head or an MLP matrix."""
    mlp = max(a.intermediate, a.moe_intermediate * max(1, a.experts_per_token)) * a.hidden
    return float(max(counts["embedding"], counts["lm_head"], mlp))


#: ``_single_tensor_adamw``'s two fp32 temporaries per element of the tensor it steps.
SINGLE_TENSOR_TEMP_B = 8.0


def single_tensor_step_bytes(a: Arch, counts: dict[str, int], n: int, stage: int) -> float:
    """Temporaries of ``adamw_single`` stepping an unflattened model: the largest tensor's."""
    return SINGLE_TENSOR_TEMP_B * _largest_param(a, counts) / (n if stage >= 3 else 1)


def _layer_params(a: Arch, counts: dict[str, int]) -> float:
    body = counts["total"] - counts["embedding"] - counts["lm_head"]
    return body / max(1, a.layers)


def fsdp_root_bytes(a: Arch, counts: dict[str, int], kind: str, act_b: float, kw: dict[str, Any]) -> float:
    """What FSDP's root unit keeps whole on every GPU from its forward to the end of backward.

    FSDP does not reshard the root after forward (FSDP1 ``_post_forward_reshard``: "Do not
    free the root's parameters in the post-forward for FULL_SHARD with the intention that
    they are immediately used for backward"; FSDP2 ``fully_shard``: the root state's
    ``reshard_after_forward`` is "specially set to False"). Under an auto-wrap of the decoder
    layers (HF Trainer / accelerate TRANSFORMER_BASED_WRAP, Answer.AI's fsdp_qlora, torchtune
    without ``custom_sharded_layers``) the root holds the embedding, final norm and LM head,
    unsharded in the compute dtype (never quantized). A full fine-tune also holds the LM
    head's gradient, the first one backward produces, until the root's post-backward
    reduce-scatter at the end. ``sharded`` (DeepSpeed ZeRO-3, or the embedding and LM head
    wrapped as their own units): nothing beyond the gathered layers.
    """
    if kw["fsdp_root"] != "embeddings":
        return 0.0
    head = counts["lm_head"] or counts["embedding"]  # tied: one tensor, used twice
    params = counts["embedding"] + counts["lm_head"] + a.hidden
    grad = head if kind == "full_ft" else 0
    return (params + grad) * act_b


def training(ctx: Ctx, kind: str, g: GPUSpec, **kw: Any) -> MemoryEstimate:
    a, counts = ctx.arch, ctx.counts
    dtype = kw["dtype"]
    notes: list[str] = []
    if kind in ("full_ft", "lora") and dtype in ("fp8", "int4"):
        hint = " (use kind qlora for a 4-bit base)" if dtype == "int4" else ""
        raise RunjobError(f"{kind} supports dtype bf16, fp16 or fp32, not {dtype}{hint}")
    if kw["tp"] not in (None, 1):
        notes.append("tensor parallelism is not modelled for training; sharding is by zero_stage")
    optim = (kw["optimizer"] or "adamw").lower().replace("-", "_")
    optim = OPTIMIZER_ALIASES.get(optim, optim)
    if optim not in OPTIMIZERS:
        raise RunjobError(f"unknown optimizer {optim!r}; use one of {', '.join(OPTIMIZERS)}")
    kw["optimizer"] = optim
    state_b, temp_b, paged = OPTIMIZERS[optim]
    pure = not kw["master_weights"] and dtype in ("bf16", "fp16")
    if pure and state_b >= 4:
        # pure bf16: torch optimizers create their states like the parameter (bf16), so the
        # fp32 figures halve; 8-bit states and Adafactor's factors are unchanged
        state_b, temp_b = state_b / 2, temp_b / 2
    offload = bool(kw["cpu_offload"])
    if paged:
        notes.append("paged optimizer: its states live in CUDA unified memory outside PyTorch's allocator "
                     "(paged_gib) and are evicted to host RAM under memory pressure")
    n = kw["num_gpus"]
    stage = kw["zero_stage"]
    tokens = kw["seq_len"] * kw["batch"]
    act_b = 4 if dtype == "fp32" else 2
    psi = counts["total"]
    trainable = 0
    lora_params = 0
    if kind == "full_ft":
        # Rajbhandari et al. 2019 (ZeRO), section 3.1: mixed-precision Adam keeps 2 + 2 + K
        # bytes per parameter with K = 12 (fp32 master copy, momentum, variance)
        if dtype == "fp32":
            w_b, g_b, o_b = 4.0, 4.0, state_b
        elif pure:  # no fp32 master copy (torchtune dtype=bf16, Lightning "bf16-true")
            w_b, g_b, o_b = 2.0, 2.0, state_b
        else:  # mixed precision: 16-bit weights and grads, fp32 master copy + optimizer states
            w_b, g_b, o_b = 2.0, 2.0, 4.0 + state_b
        trainable = psi
        weights = psi * w_b / (n if stage >= 3 else 1)
        grads = psi * g_b / (n if stage >= 2 else 1)
        opt = psi * o_b / (n if stage >= 1 else 1)
        mode = "full"
        step_temp = psi * temp_b / (n if stage >= 1 else 1)
        if kw["optimizer_in_bwd"]:
            # torchtune's optimizer_in_bwd: a post-accumulate-grad hook steps each parameter
            # and frees its gradient, so only the largest parameter's gradient is ever whole
            grads = min(grads, _largest_param(a, counts) * g_b / (n if stage >= 2 else 1))
            step_temp = 0.0
        elif not pure and dtype != "fp32" and stage <= 2 and not kw["cpu_offload"]:
            # an fp32 master copy is stepped with an fp32 gradient the step builds from the
            # 16-bit ones (DeepSpeed FP16_Optimizer / ZeRO-1/2; see zero_buffers). DeepSpeed
            # hands the optimizer one flat tensor per group, so a single-tensor AdamW's
            # temporaries cover the rank's whole partition.
            single_b = SINGLE_TENSOR_TEMP_B if optim == "adamw_single" else temp_b
            step_temp = master_step_bytes(psi, n, stage, single_b)
        elif optim == "adamw_single":
            step_temp = single_tensor_step_bytes(a, counts, n, stage) * (0.5 if pure else 1.0)
    else:
        targets = kw["lora_targets"] or default_lora_targets(a)
        kw["lora_targets"] = tuple(targets)
        mods = lora_modules(a, tuple(targets))
        r = kw["lora_rank"]
        if not isinstance(r, int) or r < 1:
            raise RunjobError(f"lora_rank must be an integer >= 1, got {r!r}")
        lora_params = sum(r * (fi + fo) * copies for _n, fi, fo, copies in mods)
        trainable = lora_params
        if kind == "lora":
            base = psi * DTYPE_BYTES[dtype]
        else:
            base = nf4_weight_bytes(counts)
            if dtype not in ("bf16", "fp16"):
                notes.append("qlora: base weights are NF4, compute dtype bf16")
            act_b = 2
        ldt = (kw["lora_dtype"] or "fp32").lower()
        if ldt not in LORA_DTYPES:
            raise RunjobError(f"unknown lora_dtype {ldt!r}; use fp32, bf16 or fp16")
        lb = LORA_DTYPES[ldt]
        shard_base = n if stage >= 3 else 1
        weights = base / shard_base + lora_params * lb / (n if stage >= 3 else 1)
        grads = lora_params * lb / (n if stage >= 2 else 1)
        opt = lora_params * state_b / (n if stage >= 1 else 1)
        mode = kind
        if kind == "qlora" and kw["nf4_backend"] == "torchao":
            # torchao's linear_nf4 saves the NF4 weight, not the input (like a frozen
            # nn.Linear), so the activations follow the LoRA rule
            mode = "lora"
        step_temp = lora_params * temp_b / (n if stage >= 1 else 1)
        if kw["optimizer_in_bwd"]:
            step_temp = 0.0  # the adapters' gradients are small: kept whole (an upper bound)
    per_layer = activation_bytes_per_token_layer(
        a,
        mode=mode,
        act_bytes=act_b,
        lora_targets=tuple(kw["lora_targets"] or ()) if kind != "full_ft" else (),
        lora_dropout=kw["lora_dropout"],
        flash_attention=kw["flash_attention"],
        seq_len=kw["seq_len"],
        adapter_bytes=LORA_DTYPES[(kw["lora_dtype"] or "fp32").lower()] if kind != "full_ft" else None,
    )
    # Korthikanti et al. 2022 (arXiv:2205.05198), section 4: without recomputation every layer
    # keeps its per-layer activations (``per_layer``, their s*b*h*(34 + 5*a*s/h) minus the
    # attention matrix flash/SDPA attention never stores); with full activation
    # checkpointing each layer keeps only its 16-bit input (2*s*b*h bytes) and one layer's
    # activations are rebuilt at a time during backward.
    if kw["grad_checkpointing"]:
        layers_act = tokens * (a.layers * act_b * a.hidden + per_layer)
    else:
        layers_act = tokens * a.layers * per_layer
    logits = logits_bytes(tokens, a.vocab, act_b, kw["loss"], bool(kw["torch_compile"]))
    final = tokens * a.hidden * (4 + act_b)  # final RMSNorm: fp32 input + LM-head input
    activations = layers_act + logits + final
    bucket = 0.0 if offload else reduce_bucket_bytes(stage, act_b)
    gather = 0.0
    if stage >= 3 and (n > 1 or offload):
        # ZeRO-3/FSDP all-gathers a layer's weights (and prefetches the next one)
        per_layer_w = _layer_params(a, counts) * (0.55 if kind == "qlora" else DTYPE_BYTES.get(dtype, 2))
        gather = 2 * per_layer_w
    root = fsdp_root_bytes(a, counts, kind, act_b, kw) if stage >= 3 and (n > 1 or offload) else 0.0
    paged_bytes = 0.0
    if paged:
        paged_bytes, opt = opt, 0.0
    offloaded = 0.0
    if offload:
        # ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840): optimizer states, fp32 master
        # weights and the reduced 16-bit gradients live on the host, the Adam step runs on
        # the CPU; the GPU keeps a gradient bucket of about one layer. With ZeRO-3 /
        # FSDP(cpu_offload=CPUOffload(offload_params=True)) the weights go too and the GPU
        # holds only the all-gathered layers (``gather`` below).
        layer_grad = _layer_params(a, counts) * (2 if kind == "full_ft" else 0) + (grads / max(1, a.layers))
        offloaded = opt + grads + paged_bytes
        opt, paged_bytes, step_temp = 0.0, 0.0, 0.0
        grads = min(grads, layer_grad)
        if stage >= 3:
            offloaded += weights
            weights = 0.0
    states = weights + grads + opt
    torch_peak = states + max(activations + bucket + root, step_temp) + gather
    overhead = CUDA_CONTEXT_GIB * GIB + ALLOCATOR_SLACK * torch_peak
    total = torch_peak + overhead
    vram = g.total_bytes
    fits = total <= vram
    if a.is_moe:
        experts = "experts" in (kw["lora_targets"] or ())
        notes.append("MoE: all experts resident and trained" if kind == "full_ft" else
                     "MoE: all experts resident; LoRA adapters on every routed expert" if experts else
                     "MoE: all experts resident; LoRA adapters on attention, dense and shared MLPs (add target 'experts' for the routed experts)")
    if stage == 0 and n > 1:
        notes.append("zero_stage 0: every data-parallel rank holds full model states")
    return MemoryEstimate(
        model=ctx.resolved.name,
        model_source=ctx.resolved.source,
        kind=kind,
        gpu=g.name,
        gpu_vram_gib=gib(vram),
        num_gpus=n,
        tp=1,
        dtype=dtype,
        params_total=psi,
        params_active=counts["active"],
        params_trainable=trainable,
        weights_gib=gib(weights),
        kv_bytes_per_token=kv_bytes_per_token(a, 2.0, 1),
        kv_cache_gib=0.0,
        kv_capacity_tokens=0,
        max_model_len=None,
        max_concurrency=0.0,
        optimizer_gib=gib(opt),
        gradients_gib=gib(grads),
        activations_gib=gib(activations),
        model_states_gib=gib(states),
        overhead_gib=gib(overhead),
        torch_peak_gib=gib(torch_peak),
        total_gib=gib(total),
        fits=fits,
        headroom_gib=gib(vram - total),
        engine="torch",
        reserved_gib=gib(torch_peak * (1 + ALLOCATOR_SLACK)),
        offloaded_gib=gib(offloaded),
        paged_gib=gib(paged_bytes),
        notes=tuple(notes),
        breakdown={
            "activations_layers_gib": gib(layers_act),
            "activations_logits_gib": gib(logits),
            "activation_bytes_per_token_layer": per_layer,
            "optimizer_step_temporaries_gib": gib(step_temp),
            "zero3_gather_gib": gib(gather),
            "fsdp_root_gib": gib(root),
            "reduce_bucket_gib": gib(bucket),
            "cuda_context_gib": CUDA_CONTEXT_GIB,
            "lora_params": lora_params,
            "tokens_per_gpu": tokens,
            "total_all_gpus_gib": gib(total) * n,  # every data-parallel rank holds the same
        },
        settings=settings_of(kw, num_gpus=n),
    )
