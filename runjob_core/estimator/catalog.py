"""Built-in table of popular open models: the ``config.json`` fields memory arithmetic needs.

Each entry records the Hugging Face repository its ``config.json`` comes from (``source``)
and the parameter count its model card publishes (``published_params``), which the tests
check the arithmetic of :func:`runjob_core.estimator.arch.count_params` against (2 %).

How the numbers were recorded: the fields below are the values of each repository's
``config.json`` (only the fields memory arithmetic reads). They were cross-checked against
public copies found with the research ``search`` tool, e.g. ``vulkomilev/oumi``
``configs/recipes/llama3_1/README.md`` (Llama-3.1 8B/70B shapes), ``zyzshishui/slime``
``scripts/models/qwen3-30B-A3B.sh`` (Qwen3-30B-A3B: 48 layers, hidden 2048, 32 heads, 4 KV
groups, 128 experts of 768, top-8), ``AI-Hypercomputer/maxtext``
``MaxText/utils/ckpt_conversion/utils/hf_model_configs.py`` (Gemma-2 9B/27B),
``mauer4/Attention-From-Scratch`` ``weights/allenai/OLMo-2-1124-13B/config.json`` (verbatim
OLMo-2 13B config), a Megatron-style config of DeepSeek-V2-Lite (27 layers, 64 routed
experts of 1408, 2 shared, first layer dense, kv_lora_rank 512, no q_lora), a copy of the
DeepSeek-V3 config (kv_lora_rank 512, q_lora_rank 1536, 256 routed experts of 2048, 1 shared,
3 dense layers) and the Mixtral-8x7B config pasted in hiyouga/LlamaFactory#2403.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

import attrs


@attrs.frozen
class ModelSpec:
    name: str  # short name, e.g. "Llama-3.1-8B"
    repo_id: str  # Hugging Face repository of the config.json
    family: str  # for "a smaller model of the same family" suggestions
    published_params: int
    config: dict[str, Any] = attrs.field(eq=False)
    note: str = ""

    @property
    def source(self) -> str:
        return f"https://huggingface.co/{self.repo_id}/blob/main/config.json"


def _llama(v, h, i, n, heads, kv, *, tie=False, head_dim=None, maxpos=131072, mt="llama", **extra):
    cfg = {
        "model_type": mt,
        "vocab_size": v,
        "hidden_size": h,
        "intermediate_size": i,
        "num_hidden_layers": n,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "tie_word_embeddings": tie,
        "max_position_embeddings": maxpos,
    }
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    cfg.update(extra)
    return cfg


MODELS: tuple[ModelSpec, ...] = (
    # --- Meta Llama ---------------------------------------------------------------------
    ModelSpec("Llama-3.1-8B", "meta-llama/Llama-3.1-8B", "llama-3", 8_030_261_248,
              _llama(128256, 4096, 14336, 32, 32, 8)),
    ModelSpec("Llama-3.1-70B", "meta-llama/Llama-3.1-70B", "llama-3", 70_553_706_496,
              _llama(128256, 8192, 28672, 80, 64, 8)),
    ModelSpec("Llama-3.1-405B", "meta-llama/Llama-3.1-405B", "llama-3", 405_853_388_800,
              _llama(128256, 16384, 53248, 126, 128, 8)),
    ModelSpec("Llama-3.2-1B", "meta-llama/Llama-3.2-1B", "llama-3", 1_235_814_400,
              _llama(128256, 2048, 8192, 16, 32, 8, tie=True, head_dim=64)),
    ModelSpec("Llama-3.2-3B", "meta-llama/Llama-3.2-3B", "llama-3", 3_212_749_824,
              _llama(128256, 3072, 8192, 28, 24, 8, tie=True, head_dim=128)),
    ModelSpec("Llama-2-7B", "meta-llama/Llama-2-7b-hf", "llama-2", 6_738_415_616,
              _llama(32000, 4096, 11008, 32, 32, 32, maxpos=4096)),
    ModelSpec("Llama-2-13B", "meta-llama/Llama-2-13b-hf", "llama-2", 13_015_864_320,
              _llama(32000, 5120, 13824, 40, 40, 40, maxpos=4096)),
    ModelSpec("Llama-2-70B", "meta-llama/Llama-2-70b-hf", "llama-2", 68_976_648_192,
              _llama(32000, 8192, 28672, 80, 64, 8, maxpos=4096)),
    ModelSpec("LLaMA-65B", "huggyllama/llama-65b", "llama-1", 65_285_660_672,
              _llama(32000, 8192, 22016, 80, 64, 64, maxpos=2048),
              note="LLaMA-1 65B, the model of the QLoRA paper's 48 GB result"),
    # --- Qwen 2.5 (qwen2 architecture: bias on q/k/v) -------------------------------------
    ModelSpec("Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", "qwen2.5", 494_032_768,
              _llama(151936, 896, 4864, 24, 14, 2, tie=True, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B", "qwen2.5", 1_543_714_304,
              _llama(151936, 1536, 8960, 28, 12, 2, tie=True, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-3B", "Qwen/Qwen2.5-3B", "qwen2.5", 3_085_938_688,
              _llama(151936, 2048, 11008, 36, 16, 2, tie=True, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct", "qwen2.5", 7_615_616_512,
              _llama(152064, 3584, 18944, 28, 28, 4, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-14B", "Qwen/Qwen2.5-14B-Instruct", "qwen2.5", 14_770_033_664,
              _llama(152064, 5120, 13824, 48, 40, 8, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-32B", "Qwen/Qwen2.5-32B-Instruct", "qwen2.5", 32_763_876_352,
              _llama(152064, 5120, 27648, 64, 40, 8, maxpos=32768, mt="qwen2")),
    ModelSpec("Qwen2.5-72B", "Qwen/Qwen2.5-72B-Instruct", "qwen2.5", 72_706_203_648,
              _llama(152064, 8192, 29568, 80, 64, 8, maxpos=32768, mt="qwen2")),
    # --- Qwen 3 (per-head q/k RMSNorm, no bias) -------------------------------------------
    ModelSpec("Qwen3-8B", "Qwen/Qwen3-8B", "qwen3", 8_190_735_360,
              _llama(151936, 4096, 12288, 36, 32, 8, head_dim=128, maxpos=40960, mt="qwen3")),
    ModelSpec("Qwen3-32B", "Qwen/Qwen3-32B", "qwen3", 32_762_123_264,
              _llama(151936, 5120, 25600, 64, 64, 8, head_dim=128, maxpos=40960, mt="qwen3")),
    ModelSpec("Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B", "qwen3", 30_532_122_624,
              _llama(151936, 2048, 6144, 48, 32, 4, head_dim=128, maxpos=40960, mt="qwen3_moe",
                     num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                     decoder_sparse_step=1, mlp_only_layers=[]),
              note="MoE: 128 experts of 768, 8 active; 3.3B active parameters"),
    # --- Mistral ------------------------------------------------------------------------
    ModelSpec("Mistral-7B-v0.3", "mistralai/Mistral-7B-v0.3", "mistral", 7_248_023_552,
              _llama(32768, 4096, 14336, 32, 32, 8, maxpos=32768, mt="mistral")),
    ModelSpec("Mixtral-8x7B", "mistralai/Mixtral-8x7B-v0.1", "mixtral", 46_702_792_704,
              _llama(32000, 4096, 14336, 32, 32, 8, maxpos=32768, mt="mixtral",
                     num_local_experts=8, num_experts_per_tok=2),
              note="MoE: 8 experts of 14336, 2 active; 12.9B active parameters"),
    # --- Google Gemma-2 (tied embeddings, 4 norms per layer) -------------------------------
    ModelSpec("Gemma-2-9B", "google/gemma-2-9b", "gemma-2", 9_241_705_984,
              _llama(256000, 3584, 14336, 42, 16, 8, tie=True, head_dim=256, maxpos=8192,
                     mt="gemma2", sliding_window=4096),
              note="alternating 4096-token sliding-window layers; KV counted as full attention"),
    ModelSpec("Gemma-2-27B", "google/gemma-2-27b", "gemma-2", 27_227_128_320,
              _llama(256000, 4608, 36864, 46, 32, 16, tie=True, head_dim=128, maxpos=8192,
                     mt="gemma2", sliding_window=4096),
              note="alternating 4096-token sliding-window layers; KV counted as full attention"),
    # --- Microsoft Phi-3 ----------------------------------------------------------------
    ModelSpec("Phi-3-mini-4k", "microsoft/Phi-3-mini-4k-instruct", "phi-3", 3_821_079_552,
              _llama(32064, 3072, 8192, 32, 32, 32, maxpos=4096, mt="phi3")),
    # --- DeepSeek (MLA + MoE) -------------------------------------------------------------
    ModelSpec("DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V2-Lite", "deepseek", 15_706_484_224,
              _llama(102400, 2048, 10944, 27, 16, 16, maxpos=163840, mt="deepseek_v2",
                     moe_intermediate_size=1408, n_routed_experts=64, n_shared_experts=2,
                     num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1,
                     kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
                     qk_nope_head_dim=128, v_head_dim=128),
              note="MLA + MoE: 64 routed experts of 1408 + 2 shared, first layer dense"),
    ModelSpec("DeepSeek-V3", "deepseek-ai/DeepSeek-V3", "deepseek", 671_000_000_000,
              _llama(129280, 7168, 18432, 61, 128, 128, maxpos=163840, mt="deepseek_v3",
                     moe_intermediate_size=2048, n_routed_experts=256, n_shared_experts=1,
                     num_experts_per_tok=8, first_k_dense_replace=3, moe_layer_freq=1,
                     kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
                     qk_nope_head_dim=128, v_head_dim=128, topk_method="noaux_tc",
                     num_nextn_predict_layers=1),
              note="671B main model (the published count); the checkpoint also holds a 14B "
                   "multi-token-prediction layer (685B in total), which vLLM does not load by default"),
    # --- AllenAI OLMo-2 -------------------------------------------------------------------
    ModelSpec("OLMo-2-7B", "allenai/OLMo-2-1124-7B", "olmo-2", 7_298_617_344,
              _llama(100352, 4096, 11008, 32, 32, 32, maxpos=4096, mt="olmo2")),
    ModelSpec("OLMo-2-13B", "allenai/OLMo-2-1124-13B", "olmo-2", 13_716_000_000,
              _llama(100352, 5120, 13824, 40, 40, 40, maxpos=4096, mt="olmo2")),
)

_SUFFIXES = ("-instruct", "-chat", "-it", "-hf", "-base", "-4k-instruct")


def _norm(name: str) -> str:
    n = name.strip().lower()
    n = n.rsplit("/", 1)[-1]
    n = n.replace("_", "-")
    n = re.sub(r"^meta-llama-", "llama-", n)  # Meta-Llama-3.1-8B -> llama-3.1-8b
    for suf in _SUFFIXES:
        if n.endswith(suf):
            n = n[: -len(suf)]
    n = re.sub(r"-(\d{4})$", "", n)  # -2407 style date tags
    return n


def _index() -> dict[str, ModelSpec]:
    idx: dict[str, ModelSpec] = {}
    for m in MODELS:
        for key in (m.name, m.repo_id, _norm(m.name), _norm(m.repo_id)):
            idx.setdefault(key.lower(), m)
    # a few common spellings
    extra = {
        "phi-3-mini": "Phi-3-mini-4k",
        "phi-3-mini-4k": "Phi-3-mini-4k",
        "olmo-2-1124-7b": "OLMo-2-7B",
        "olmo-2-1124-13b": "OLMo-2-13B",
        "llama-3-8b": "Llama-3.1-8B",
        "llama-3-70b": "Llama-3.1-70B",
        "llama-3.3-70b": "Llama-3.1-70B",
        "llama-2-7b": "Llama-2-7B",
        "llama-7b": "Llama-2-7B",
        "llama-65b": "LLaMA-65B",
        "mixtral-8x7b-v0.1": "Mixtral-8x7B",
        "mistral-7b": "Mistral-7B-v0.3",
        "deepseek-r1": "DeepSeek-V3",
        "gemma-2-9b": "Gemma-2-9B",
        "gemma-2-27b": "Gemma-2-27B",
    }
    by_name = {m.name: m for m in MODELS}
    for k, v in extra.items():
        idx.setdefault(k, by_name[v])
    return idx


_INDEX = _index()


def find_model(name: str) -> ModelSpec | None:
    """Case-insensitive lookup by repository id or short name (``-Instruct`` etc. ignored)."""
    key = name.strip().lower()
    return _INDEX.get(key) or _INDEX.get(_norm(name))


def close_model_names(name: str, n: int = 4) -> list[str]:
    names = [m.name for m in MODELS] + [m.repo_id for m in MODELS]
    lowered = {x.lower(): x for x in names}
    hits = difflib.get_close_matches(_norm(name), list(lowered), n=n * 2, cutoff=0.4)
    out: list[str] = []
    for h in hits:
        spec = find_model(lowered[h])
        if spec and spec.name not in out:
            out.append(spec.name)
    return out[:n]
