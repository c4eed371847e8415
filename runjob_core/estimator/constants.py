"""The constants of the memory estimate, each with where it comes from.

Kinds, engines and dtypes the estimate accepts; per-process overheads (CUDA context, vLLM's
non-torch memory and CUDA graphs); quantisation constants; the caching allocator's slack;
what each optimizer keeps. Used by :mod:`runjob_core.estimator.memory` and the modules it
dispatches to (:mod:`~runjob_core.estimator.vllm_memory`, :mod:`~runjob_core.estimator.engines`,
:mod:`~runjob_core.estimator.training`).
"""

from __future__ import annotations

KINDS = ("inference", "full_ft", "lora", "qlora")
ENGINES = ("vllm", "hf", "sglang")
DTYPES = ("bf16", "fp16", "fp32", "fp8", "int4")
DTYPE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int4": 0.5}

#: CUDA context + cuBLAS/cuDNN handles of one process; 0.3-0.6 GiB on Ampere/Hopper with
#: lazy module loading, up to ~1 GiB with eager loading. Not part of vLLM's budget.
CUDA_CONTEXT_GIB = 0.5
#: vLLM "non_torch_memory": 0.12-0.35 GiB on one GPU in the logs of vllm#10517, #13882 and
#: the V1 profile summaries; 0.25-2 GiB with tensor parallelism (NCCL + custom all-reduce
#: buffers, vllm#13061 and the Bamba PR #10909).
NON_TORCH_GIB_TP1 = 0.3
NON_TORCH_GIB_TP = 0.6
#: CUDA graphs captured after the KV cache is allocated (outside the budget); vLLM logs
#: "Graph capturing finished ... took 0.27-1.5 GiB".
CUDA_GRAPHS_GIB = 0.5
#: vLLM block size: KV capacity is a whole number of 16-token blocks.
VLLM_BLOCK = 16
#: GPTQ/AWQ group size 128 with an fp16 scale and a packed zero point per group.
INT4_GROUP_BYTES_PER_PARAM = 4.0 / 128
#: bitsandbytes NF4 with double quantisation (Dettmers et al. 2023, QLoRA, arXiv:2305.14314):
#: an 8-bit absmax per 64 weights plus an fp32 constant per 256 of those.
NF4_DQ_BYTES_PER_PARAM = 1.0 / 64 + 4.0 / (64 * 256)
#: PyTorch caching-allocator slack on top of the torch peak during training (blocks rounded
#: to 512 B, 2 MiB segments that cannot be split across streams): what separates
#: ``max_memory_reserved`` from ``max_memory_allocated``. A heuristic, not fitted to a
#: source: the published training cases compare ``torch_peak_gib`` (allocated), so this
#: only moves ``reserved_gib``, ``total_gib`` and the verdict.
ALLOCATOR_SLACK = 0.05
#: Optimizers: (state bytes per trainable parameter with fp32 states, step-temporary bytes per
#: parameter, states paged). ``adamw`` is torch.optim.AdamW (two moments, Loshchilov & Hutter
#: 2019) with its default foreach implementation, whose step allocates one temporary list as
#: large as the parameters (``_foreach_sqrt`` of the second moments); the fused and
#: bitsandbytes optimizers update in place. ``adamw8bit``: bitsandbytes 8-bit blockwise states
#: (Dettmers et al. 2022, arXiv:2110.02861), 2 bytes per parameter. ``paged_*``: the same
#: states in CUDA unified memory (``cudaMallocManaged``, bitsandbytes ``GlobalPageManager``),
#: outside PyTorch's caching allocator and evictable to host RAM, so they are reported as
#: ``paged_gib`` and not counted against the card. ``adafactor`` (Shazeer & Stern 2018,
#: arXiv:1804.04235) keeps factored row/column second-moment statistics, O(m+n) per m x n
#: matrix and no first moment with the transformers defaults (beta1=None): ~0.03 byte per
#: parameter for 4k-wide layers. ``sgd``: torch.optim.SGD without momentum keeps nothing.
#: ``adamw_single``: torch.optim.AdamW(foreach=False), what torch < 2.0 ran by default: its
#: ``_single_tensor_adamw`` steps one tensor at a time and holds two temporaries of that
#: tensor at once (``exp_avg_sq.sqrt()`` and its quotient), so its temporaries scale with the
#: largest tensor it is handed (training.single_tensor_step_bytes), not with the model.
OPTIMIZERS = {
    "adamw": (8.0, 4.0, False),
    "adamw_single": (8.0, 0.0, False),
    "adamw_fused": (8.0, 0.0, False),
    "adamw8bit": (2.0, 0.0, False),
    "paged_adamw": (8.0, 0.0, True),
    "paged_adamw8bit": (2.0, 0.0, True),
    "adafactor": (0.03, 0.0, False),
    "sgd": (0.0, 0.0, False),
}
#: Older spellings (transformers' ``optim`` names) kept working.
OPTIMIZER_ALIASES = {"adamw_8bit": "adamw8bit", "paged_adamw_8bit": "paged_adamw8bit", "adamw_torch": "adamw",
                     "adamw_torch_fused": "adamw_fused", "adamw_bnb_8bit": "adamw8bit", "paged_adamw_32bit": "paged_adamw"}
LORA_DTYPES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
#: How the training loss is computed (see :func:`runjob_core.estimator.training.logits_bytes`).
LOSSES = ("standard", "chunked", "fused")
#: Who stores QLoRA's 4-bit base: bitsandbytes (HF/PEFT) or torchao (torchtune).
NF4_BACKENDS = ("bnb", "torchao")
#: What FSDP's root unit holds whole through forward and backward (see ``estimate``).
FSDP_ROOTS = ("sharded", "embeddings")
