"""Architecture arithmetic from a Hugging Face ``config.json``: parameter counts, KV-cache
bytes per token and activation bytes per token.

Everything here is a pure function of the config dictionary; nothing is downloaded.
Supported layouts: dense decoder-only transformers (Llama, Mistral, Qwen2/2.5/3, Gemma-2,
Phi-3, OLMo-2), mixture-of-experts (Mixtral, Qwen2-MoE/Qwen3-MoE, DeepSeek-V2/V3 with shared
experts and dense first layers) and DeepSeek's multi-head latent attention (MLA).
Multimodal configs are read through their ``text_config``.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from runjob_core.errors import RunjobError

# Model types whose config does not spell out ``tie_word_embeddings`` but whose
# transformers class ties the embeddings by default.
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text"}
# Non-gated MLP (up -> act -> down) with biases and LayerNorm(bias): GPT-2 style.
_NON_GATED = {"gpt2", "gpt_neox", "gpt_bigcode", "opt", "falcon", "phi", "bloom", "starcoder2", "gptj"}
# Model types with a bias on the q/k/v projections even though the config has no flag.
_QKV_BIAS = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"}
# Four RMSNorms per decoder layer (pre/post attention, pre/post feed-forward).
_FOUR_NORMS = {"gemma2", "gemma3", "gemma3_text"}
# Per-head RMSNorm on q and k (size head_dim each).
_QK_NORM_HEAD = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text"}
# Full-width RMSNorm on q (heads*head_dim) and k (kv_heads*head_dim).
_QK_NORM_FULL = {"olmo2"}


@attrs.frozen
class Arch:
    """The numbers of a decoder-only transformer that memory arithmetic needs."""

    model_type: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tie_embeddings: bool
    max_position: int | None = None
    gated_mlp: bool = True
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    layernorm_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: str = "none"  # none | head | full
    # mixture of experts
    n_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    n_shared_experts: int = 0
    shared_intermediate: int = 0  # qwen2_moe style single shared expert
    shared_expert_gate: bool = False
    first_dense_layers: int = 0
    moe_layer_freq: int = 1
    sparse_step: int = 1
    mlp_only_layers: tuple[int, ...] = ()
    router_bias: bool = False
    # multi-head latent attention (DeepSeek-V2/V3)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    def is_moe_layer(self, i: int) -> bool:
        if not self.is_moe:
            return False
        if self.model_type.startswith("deepseek"):
            return i >= self.first_dense_layers and i % max(1, self.moe_layer_freq) == 0
        if self.model_type in ("qwen2_moe", "qwen3_moe"):
            return i not in self.mlp_only_layers and (i + 1) % max(1, self.sparse_step) == 0
        return True

    @property
    def n_moe_layers(self) -> int:
        return sum(1 for i in range(self.layers) if self.is_moe_layer(i))

    # -- attention shapes -------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of one of K or V (what the attention kernel reads)."""
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.kv_heads * self.head_dim

    @property
    def v_dim(self) -> int:
        if self.is_mla:
            return self.heads * self.v_head_dim
        return self.kv_heads * self.head_dim

    @property
    def o_in_dim(self) -> int:
        if self.is_mla:
            return self.heads * self.v_head_dim
        return self.heads * self.head_dim


def _get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def arch_from_config(config: Mapping[str, Any], *, source: str = "config") -> Arch:
    """Normalise a Hugging Face config dictionary into an :class:`Arch`.

    Raises :class:`RunjobError` when a required field is missing.
    """
    cfg: Mapping[str, Any] = config
    if "hidden_size" not in cfg and "n_embd" not in cfg:
        for sub in ("text_config", "llm_config", "language_config"):
            if isinstance(cfg.get(sub), Mapping) and (
                "hidden_size" in cfg[sub] or "n_embd" in cfg[sub]
            ):
                cfg = cfg[sub]
                break
    model_type = str(_get(cfg, "model_type", default="") or "")
    hidden = _get(cfg, "hidden_size", "n_embd", "d_model")
    layers = _get(cfg, "num_hidden_layers", "n_layer", "num_layers")
    heads = _get(cfg, "num_attention_heads", "n_head")
    vocab = _get(cfg, "vocab_size")
    missing = [
        name
        for name, val in (
            ("hidden_size", hidden),
            ("num_hidden_layers", layers),
            ("num_attention_heads", heads),
            ("vocab_size", vocab),
        )
        if val is None
    ]
    if missing:
        raise RunjobError(f"{source}: config.json lacks {', '.join(missing)}; cannot estimate memory")
    hidden, layers, heads, vocab = int(hidden), int(layers), int(heads), int(vocab)
    kv_heads = int(_get(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    if model_type == "falcon" and not cfg.get("new_decoder_architecture") and cfg.get("multi_query"):
        kv_heads = 1
    if model_type == "gpt_bigcode" and cfg.get("multi_query", True):
        # GPTBigCodeConfig.multi_query defaults to True (StarCoder, octocoder): one K/V head
        kv_heads = 1
    head_dim = int(_get(cfg, "head_dim", default=hidden // heads))
    gated = model_type not in _NON_GATED
    intermediate = _get(cfg, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size")
    if intermediate is None:
        intermediate = 4 * hidden
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type in _TIED_BY_DEFAULT or model_type in _NON_GATED
    qkv_bias = bool(
        cfg.get("attention_bias", False) or cfg.get("qkv_bias", False) or model_type in _QKV_BIAS
    )
    o_bias = bool(cfg.get("attention_bias", False)) or model_type in _NON_GATED
    mlp_bias = bool(cfg.get("mlp_bias", False)) or model_type in _NON_GATED
    if model_type in _NON_GATED:
        qkv_bias = True
    n_experts = int(_get(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0) or 0)
    moe_inter = int(_get(cfg, "moe_intermediate_size", default=0) or 0)
    if n_experts and not moe_inter:
        moe_inter = int(intermediate)  # Mixtral: each expert is a full-width MLP
    qk_norm = "head" if model_type in _QK_NORM_HEAD else "full" if model_type in _QK_NORM_FULL else "none"
    return Arch(
        model_type=model_type,
        vocab=vocab,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=int(intermediate),
        tie_embeddings=bool(tie),
        max_position=_get(cfg, "max_position_embeddings", "n_positions", "seq_length"),
        gated_mlp=gated,
        qkv_bias=qkv_bias,
        o_bias=o_bias,
        mlp_bias=mlp_bias,
        layernorm_bias=model_type in _NON_GATED,
        norms_per_layer=4 if model_type in _FOUR_NORMS else 2,
        qk_norm=qk_norm,
        n_experts=n_experts,
        experts_per_token=int(_get(cfg, "num_experts_per_tok", "moe_top_k", default=0) or 0),
        moe_intermediate=moe_inter,
        n_shared_experts=int(_get(cfg, "n_shared_experts", default=0) or 0),
        shared_intermediate=int(_get(cfg, "shared_expert_intermediate_size", default=0) or 0),
        shared_expert_gate=bool(_get(cfg, "shared_expert_intermediate_size", default=0)),
        first_dense_layers=int(_get(cfg, "first_k_dense_replace", default=0) or 0),
        moe_layer_freq=int(_get(cfg, "moe_layer_freq", default=1) or 1),
        sparse_step=int(_get(cfg, "decoder_sparse_step", default=1) or 1),
        mlp_only_layers=tuple(int(i) for i in (cfg.get("mlp_only_layers") or ())),
        router_bias=str(cfg.get("topk_method", "")) == "noaux_tc",
        kv_lora_rank=int(_get(cfg, "kv_lora_rank", default=0) or 0),
        q_lora_rank=int(_get(cfg, "q_lora_rank", default=0) or 0),
        qk_rope_head_dim=int(_get(cfg, "qk_rope_head_dim", default=0) or 0),
        qk_nope_head_dim=int(_get(cfg, "qk_nope_head_dim", default=0) or 0),
        v_head_dim=int(_get(cfg, "v_head_dim", default=0) or 0),
        mtp_layers=int(_get(cfg, "num_nextn_predict_layers", default=0) or 0),
    )


# ---------------------------------------------------------------------------------------
# parameter counts
# ---------------------------------------------------------------------------------------


def _attention_params(a: Arch) -> tuple[int, int]:
    """(linear weights, other) parameters of one attention block."""
    h = a.hidden
    if a.is_mla:
        qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = h * a.q_lora_rank + a.q_lora_rank * a.heads * qk_head
            other = a.q_lora_rank  # q_a_layernorm
        else:
            q = h * a.heads * qk_head
            other = 0
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv_b = a.kv_lora_rank * a.heads * (a.qk_nope_head_dim + a.v_head_dim)
        o = a.heads * a.v_head_dim * h
        other += a.kv_lora_rank  # kv_a_layernorm
        return q + kv_a + kv_b + o, other
    q = h * a.heads * a.head_dim
    kv = 2 * h * a.kv_heads * a.head_dim
    o = a.heads * a.head_dim * h
    other = 0
    if a.qkv_bias:
        other += a.heads * a.head_dim + 2 * a.kv_heads * a.head_dim
    if a.o_bias:
        other += h
    if a.qk_norm == "head":
        other += 2 * a.head_dim
    elif a.qk_norm == "full":
        other += a.heads * a.head_dim + a.kv_heads * a.head_dim
    return q + kv + o, other


def _mlp_params(a: Arch, inter: int) -> tuple[int, int]:
    h = a.hidden
    if a.gated_mlp:
        lin = 3 * h * inter
        other = (2 * inter + h) if a.mlp_bias else 0
    else:
        lin = 2 * h * inter
        other = (inter + h) if a.mlp_bias else 0
    return lin, other


def count_params(a: Arch) -> dict[str, int]:
    """Parameter count broken down by part; ``total`` counts every expert (all resident).

    ``linear`` is what a 4-bit quantiser (bitsandbytes NF4, GPTQ, AWQ) turns into 4-bit:
    every projection inside the decoder layers. Embeddings, the LM head, norms, biases and
    routers stay in 16 bits.
    """
    h = a.hidden
    embed = a.vocab * h
    lm_head = 0 if a.tie_embeddings else a.vocab * h
    attn_lin, attn_other = _attention_params(a)
    dense_lin, dense_other = _mlp_params(a, a.intermediate)
    norm_w = (2 if a.layernorm_bias else 1) * h
    n_moe = a.n_moe_layers
    n_dense = a.layers - n_moe
    expert_lin, expert_other = _mlp_params(a, a.moe_intermediate) if a.is_moe else (0, 0)
    experts = n_moe * a.n_experts * (expert_lin + expert_other)
    shared = 0
    if a.is_moe:
        if a.n_shared_experts:
            sl, so = _mlp_params(a, a.moe_intermediate * a.n_shared_experts)
            shared = n_moe * (sl + so)
        if a.shared_intermediate:
            sl, so = _mlp_params(a, a.shared_intermediate)
            shared += n_moe * (sl + so + (h if a.shared_expert_gate else 0))
    router = n_moe * (h * a.n_experts + (a.n_experts if a.router_bias else 0))
    attention = a.layers * (attn_lin + attn_other)
    dense_mlp = n_dense * (dense_lin + dense_other)
    norms = a.layers * a.norms_per_layer * norm_w + norm_w
    total = embed + lm_head + attention + dense_mlp + experts + shared + router + norms
    linear = a.layers * attn_lin + n_dense * dense_lin + n_moe * a.n_experts * expert_lin
    if a.is_moe:
        if a.n_shared_experts:
            linear += n_moe * _mlp_params(a, a.moe_intermediate * a.n_shared_experts)[0]
        if a.shared_intermediate:
            linear += n_moe * _mlp_params(a, a.shared_intermediate)[0]
    active = total
    if a.is_moe and a.n_experts and a.experts_per_token:
        active = total - n_moe * (a.n_experts - a.experts_per_token) * (expert_lin + expert_other)
    return {
        "embedding": embed,
        "lm_head": lm_head,
        "attention": attention,
        "mlp_dense": dense_mlp,
        "moe_experts": experts,
        "moe_shared": shared,
        "router": router,
        "norms": norms,
        "linear": linear,
        "total": total,
        "active": active,
    }


# ---------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------


def kv_bytes_per_token(a: Arch, dtype_bytes: float, tp: int = 1) -> float:
    """KV-cache bytes one token occupies.

    GQA/MHA: ``2 (K and V) * layers * kv_heads * head_dim * dtype_bytes``.
    MLA (DeepSeek-V2/V3): vLLM caches only the compressed latent plus the decoupled RoPE key:
    ``layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes``.

    With ``tp > 1`` this is the share of one GPU: KV heads are split across ranks (and
    replicated when ``tp > kv_heads``); the MLA latent is replicated on every rank.
    """
    if a.is_mla:
        return a.layers * (a.kv_lora_rank + a.qk_rope_head_dim) * dtype_bytes
    kv_per_gpu = a.kv_heads / tp if tp <= a.kv_heads else 1
    return 2 * a.layers * kv_per_gpu * a.head_dim * dtype_bytes


# ---------------------------------------------------------------------------------------
# training activations
# ---------------------------------------------------------------------------------------

LORA_ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

#: LoRA target names by architecture, as the modules are named in the transformers model
#: classes (``modeling_bloom.py``: ``self_attention.query_key_value``/``dense``,
#: ``mlp.dense_h_to_4h``/``dense_4h_to_h``; ``modeling_gpt2.py`` and ``modeling_gpt_bigcode.py``:
#: ``attn.c_attn``/``c_proj``, ``mlp.c_fc``/``c_proj``; ``modeling_phi3.py``: ``qkv_proj``,
#: ``gate_up_proj``). The default targets are every linear projection of the decoder layers
#: (PEFT's ``target_modules="all-linear"``, the LitGPT/torchtune/axolotl recipes' choice);
#: ``--lora-targets`` picks fewer, e.g. ``query_key_value`` for PEFT's own BLOOM default
#: (``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`` in peft/utils/constants.py).
_FUSED_QKV = {"bloom": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
              "falcon": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
              "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
              "gpt2": ("c_attn", "c_proj", "c_fc"),
              "gpt_bigcode": ("c_attn", "c_proj", "c_fc"),
              "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")}
#: Target name for the routed experts of a MoE layer (each expert's gate/up/down projections).
LORA_EXPERTS = "experts"


def default_lora_targets(a: Arch) -> tuple[str, ...]:
    """Every linear projection of the architecture's decoder layers, in its own names.

    For MoE models the routed experts are left out (PEFT's usual practice, and what the
    MoE recipes of LLaMA-Factory and torchtune do); add ``experts`` to adapt them too.
    """
    return _FUSED_QKV.get(a.model_type, LORA_ALL_LINEAR)


def lora_target_names(a: Arch) -> tuple[str, ...]:
    names = default_lora_targets(a)
    return names + ((LORA_EXPERTS,) if a.is_moe else ())


def lora_modules(a: Arch, targets: tuple[str, ...]) -> list[tuple[str, int, int, int]]:
    """(name, in_features, out_features, copies in the model) of every LoRA-adapted projection.

    ``copies`` counts the modules of that name in the whole model: one per layer for
    attention, one per dense layer (or shared expert) for the MLP, ``n_experts`` per MoE
    layer for ``experts``. Fused projections (``query_key_value``, ``c_attn``,
    ``gate_up_proj``) have the fused output width. A name that is not a module of the
    architecture is an error that lists the valid ones.
    """
    h = a.hidden
    if a.is_mla:
        attn = {
            "q_proj": (h, a.q_dim),
            "k_proj": (h, a.kv_lora_rank + a.qk_rope_head_dim),
            "v_proj": (a.kv_lora_rank, a.heads * (a.qk_nope_head_dim + a.v_head_dim)),
            "o_proj": (a.o_in_dim, h),
        }
    else:
        attn = {
            "q_proj": (h, a.q_dim),
            "k_proj": (h, a.kv_dim),
            "v_proj": (h, a.v_dim),
            "o_proj": (a.o_in_dim, h),
        }
    inter = a.intermediate
    mlp = {
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }
    fused = a.model_type in _FUSED_QKV
    if fused:
        qkv = (h, a.q_dim + a.kv_dim + a.v_dim)
        attn = {"query_key_value": qkv, "c_attn": qkv, "qkv_proj": qkv, "dense": (a.o_in_dim, h), "o_proj": (a.o_in_dim, h)}
        mlp = {"dense_h_to_4h": (h, inter), "dense_4h_to_h": (inter, h), "c_fc": (h, inter),
               "gate_up_proj": (h, 2 * inter), "down_proj": (inter, h)}
    valid = lora_target_names(a)
    n_moe = a.n_moe_layers
    n_dense = a.layers - n_moe
    shared = a.moe_intermediate * a.n_shared_experts + a.shared_intermediate
    out = []
    for t in targets:
        if t not in valid:
            raise RunjobError(
                f"unknown LoRA target module {t!r} for {a.model_type or 'this'} architecture; "
                f"use some of {', '.join(valid)}"
            )
        if t in attn:
            i, o = attn[t]
            out.append((t, i, o, a.layers))
            if fused and t == "c_proj":  # GPT-2 names the MLP's output projection c_proj too
                out.append(("mlp.c_proj", inter, h, a.layers))
        elif t == LORA_EXPERTS:
            e = a.moe_intermediate
            for name, i, o in (("experts.gate_proj", h, e), ("experts.up_proj", h, e), ("experts.down_proj", e, h)):
                if name.endswith("gate_proj") and not a.gated_mlp:
                    continue
                out.append((name, i, o, n_moe * a.n_experts))
        elif t in mlp:
            i, o = mlp[t]
            if n_dense:
                out.append((t, i, o, n_dense))
            if shared and not fused:
                si, so = (h, shared) if t != "down_proj" else (shared, h)
                out.append((f"shared_expert.{t}", si, so, n_moe))
    return out


def activation_bytes_per_token_layer(
    a: Arch,
    *,
    mode: str,
    act_bytes: int,
    lora_targets: tuple[str, ...] = (),
    lora_dropout: float = 0.0,
    flash_attention: bool = True,
    seq_len: int = 0,
    adapter_bytes: float | None = None,
) -> float:
    """Bytes autograd keeps per token per decoder layer for the backward pass.

    Counting tensors saved for backward (16-bit activations, ``act_bytes`` = 2): for each
    RMSNorm its fp32 upcast input (4h bytes: HF's ``LlamaRMSNorm`` and LitGPT's ``RMSNorm``
    compute in fp32 and keep that copy), its normalised output (kept by the weight multiply
    when the norm weight trains) and the linear input; q/k/v/attention output (flash attention
    keeps q, k, v, out); for a gated MLP the gate output, up output, act(gate) and their
    product (4 * intermediate). For GPT-3 shapes (4h MLP, no GQA, no gate, LayerNorm in 16 bit)
    this is the per-layer term of Korthikanti et al. 2022, "Reducing Activation Recomputation in
    Large Transformer Models" (arXiv:2205.05198), ``s*b*h*(34 + 5*a*s/h)`` bytes, minus the
    dropout masks and, with flash attention, the ``5*a*s/h`` attention-matrix term.

    ``mode``:
      - ``full``: every linear layer is trained, so every linear input is saved.
      - ``lora``: frozen ``nn.Linear`` layers do not save their input (autograd needs the
        weight, not the input, for the input gradient): the norm outputs feeding q/k/v and
        gate/up and the down-projection input are dropped, the adapters' dropout outputs and
        masks are added.
      - ``qlora``: bitsandbytes' 4-bit matmul saves its input whatever the weight's
        ``requires_grad`` (``MatMul4Bit.forward`` keeps ``ctx.tensors = (A, B)``), so the
        frozen linear inputs are kept as in ``full``; the adapters' dropout tensors are added.

    ``adapter_bytes``: bytes of the adapters' dtype (default: the activations'). PEFT's
    ``lora.Linear.forward`` casts each adapted layer's input to ``lora_A.weight.dtype``
    (``x = self._cast_input_dtype(x, lora_A.weight.dtype)``), so fp32 adapters on a 16-bit
    model keep one fp32 copy of the input per adapted layer for ``lora_A``'s backward (or the
    fp32 dropout output and its mask), instead of sharing the 16-bit input.
    """
    b = act_bytes
    h = a.hidden
    attn = a.q_dim + a.kv_dim + a.v_dim + a.o_in_dim
    if a.is_mla:
        attn += (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank + 2 * a.q_lora_rank
    if not flash_attention:
        attn += 2 * a.heads * seq_len  # scores and softmax, 2 bytes each per (head, key)
    if a.is_moe and a.n_moe_layers == a.layers:
        k = max(1, a.experts_per_token)
        per = 4 * a.moe_intermediate if a.gated_mlp else 2 * a.moe_intermediate
        mlp_saved = k * (per + h)  # each routed copy keeps its dispatched input
        down_in = k * a.moe_intermediate
        shared_i = a.moe_intermediate * a.n_shared_experts + a.shared_intermediate
        if shared_i:
            mlp_saved += 4 * shared_i
            down_in += shared_i
        mlp_saved += a.n_experts  # router logits
    elif a.is_moe:
        # mixed dense/MoE stacks (DeepSeek): average over layers
        k = max(1, a.experts_per_token)
        shared_i = a.moe_intermediate * a.n_shared_experts + a.shared_intermediate
        moe_saved = k * (4 * a.moe_intermediate + h) + 4 * shared_i + a.n_experts
        frac = a.n_moe_layers / a.layers
        mlp_saved = frac * moe_saved + (1 - frac) * 4 * a.intermediate
        down_in = frac * (k * a.moe_intermediate + shared_i) + (1 - frac) * a.intermediate
    else:
        mlp_saved = (4 if a.gated_mlp else 2) * a.intermediate
        down_in = a.intermediate
    n_norms = a.norms_per_layer
    norm_in = 4 * h * n_norms  # fp32 copies of the norm inputs, whatever the activation dtype
    norm_out = b * h * n_norms  # normalised output kept by the (trainable) norm-weight multiply
    lin_in = b * 2 * h  # inputs of q/k/v and gate/up (shared per block)
    full = norm_in + norm_out + lin_in + b * (attn + mlp_saved)
    if mode == "full":
        return full
    adapters = 0.0
    mods = lora_modules(a, lora_targets) if lora_targets else []
    ab = b if adapter_bytes is None else adapter_bytes
    cast = ab != b  # PEFT casts the input to the adapter dtype: a copy per adapted layer
    dropout_in = 0.0
    for _name, fan_in, _fan_out, copies in mods:
        if _name.startswith("experts."):
            # a routed expert sees only its share of the tokens: top_k copies per token overall
            copies = a.n_moe_layers * max(1, a.experts_per_token)
        share = copies / a.layers
        if lora_dropout > 0:
            dropout_in += share * fan_in * (ab + 1)  # dropout output (adapter dtype) + bool mask
        elif cast:
            dropout_in += share * fan_in * ab  # the cast input lora_A keeps
    adapters += dropout_in
    if mode == "qlora":
        # frozen norm weights: no normalised-output copy; bnb keeps every linear input
        return full - norm_out + adapters
    if mode == "lora":
        # frozen norms and frozen nn.Linear: neither the normalised outputs nor the linear
        # inputs (q/k/v, gate/up, down) are kept
        lora_saved = full - norm_out - lin_in - b * down_in
        if lora_dropout <= 0 and not cast:
            # lora_A keeps its input: the shared norm outputs / down input when targeted
            names = {m[0] for m in mods}
            if names & {"q_proj", "k_proj", "v_proj", "query_key_value", "c_attn", "qkv_proj"}:
                lora_saved += b * h
            if names & {"gate_proj", "up_proj", "dense_h_to_4h", "c_fc", "gate_up_proj"}:
                lora_saved += b * h
            if names & {"down_proj", "dense_4h_to_h", "mlp.c_proj"}:
                lora_saved += b * down_in
        return lora_saved + adapters
    raise ValueError(f"unknown activation mode {mode!r}")
