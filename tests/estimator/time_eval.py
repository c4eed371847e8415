"""Score the time model on a set of measured rates (tests/estimator/data/time_*.json).

Each case names a model of the built-in table (or a stand-in of the same shape, said in
``stand_in``), the GPU and the settings the source printed, and the rate it measured:
training in tokens per second per GPU, inference in generated tokens per second of the
whole job. ``python tests/estimator/time_eval.py [heldout|tuning]`` prints the table.

A case marked ``invalid`` (a measured rate no GPU could reach under the case's own recorded settings,
by the model-free floors below) stays in the file with its reason and is left out of the scoring.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def load(name: str, *, invalid: bool = False) -> list[dict]:
    """The cases of ``time_<name>.json``; with *invalid*, those marked invalid too."""
    cases = json.loads((DATA / f"time_{name}.json").read_text(encoding="utf-8"))["cases"]
    return cases if invalid else [c for c in cases if "invalid" not in c]


def _model_path(case: dict) -> str:
    return str(DATA / case["model"]) if case["model"].startswith("configs/") else case["model"]


# ---------------------------------------------------------------------------------------------
# Model-free floors: what a measured rate implies at the least, whatever the time model says.
# Every term left out would only add work (attention scores, LoRA adapters, optimizer, norms, KV
# reads), so each figure is a lower bound of the share of the GPUs' datasheet peak the rate needs.
# ---------------------------------------------------------------------------------------------

#: An id naming selective activation checkpointing ("sel-AC", "sel-op AC"): the share of recomputed
#: blocks is not recorded, so no recompute is counted for it.
SELECTIVE_AC = "sel-"


def _matmul_params(case: dict) -> tuple[int, int, int]:
    """(matmul weights one token passes through in the decoder layers, those of one layer, LM head).

    The input embedding is a lookup, not a matmul; the head is vocab x hidden, tied or not; a MoE
    token passes through its active experts only (every inactive expert's weights taken off)."""
    from runjob_core.estimator.arch import arch_from_config, count_params
    from runjob_core.estimator.resolve import resolve_model

    arch = arch_from_config(resolve_model(_model_path(case)).config)
    counts = count_params(arch)
    layers = counts["linear"] - (counts["total"] - counts["active"])
    return layers, layers // arch.layers, arch.vocab * arch.hidden


def _peak_flops(case: dict, fp8: bool) -> tuple[float, str]:
    from runjob_core.estimator.gpu_peaks import peaks_for

    peaks = peaks_for(case["gpu"])
    if fp8 and peaks.fp8_tflops:
        return peaks.fp8_tflops * 1e12, f"{peaks.fp8_tflops:g} TFLOPS dense FP8"
    return peaks.bf16_tflops * 1e12, f"{peaks.bf16_tflops:g} TFLOPS dense BF16"


def training_floor(case: dict) -> tuple[float, str]:
    """The least share of one GPU's dense peak the measured tokens/s per GPU needs, and the arithmetic.

    FLOPs per token: forward 2 x M (M: matmul weights of the layers and the head); full fine-tuning's
    backward 4 x M (input and weight gradients); LoRA/QLoRA's backward 2 x M less one layer (input
    gradients only: the base is frozen, and the first layer's inputs need none); activation
    checkpointing recomputes the layers' forward, + 2 x layers (not the head)."""
    layers, one_layer, head = _matmul_params(case)
    mm = layers + head
    full = case["kind"] in ("full", "full_ft")
    terms = [("forward", 2 * mm)]
    terms.append(("backward, weight and input gradients", 4 * mm) if full else
                 ("backward, input gradients only", 2 * (mm - one_layer)))
    if case.get("grad_checkpointing") and SELECTIVE_AC not in case["id"]:
        terms.append(("recomputed forward of the layers", 2 * layers))
    per_token = sum(n for _, n in terms)
    peak, peak_text = _peak_flops(case, case.get("precision") == "fp8")
    share = case["measured"] * per_token / peak
    how = (f"{case['measured']:,.0f} tokens/s per GPU x {per_token / 1e9:.2f} GFLOPs per token ("
           + " + ".join(f"{what} {n / 1e9:.2f}" for what, n in terms)
           + f"; matmul weights: layers {layers / 1e9:.3f} B, head {head / 1e9:.3f} B) = "
           f"{case['measured'] * per_token / 1e12:.1f} TFLOPS, {share:.2f} of the {case['gpu']}'s {peak_text}")
    return share, how


def inference_floors(case: dict) -> list[tuple[str, float, str]]:
    """Two floors of a generation rate (generated tokens per second of the whole job), each as
    (name, share of the bound, arithmetic):

    - compute: every generated token passes once through the layers and the head, >= 2 x M FLOPs,
      on all the job's GPUs at their dense peak (prompt tokens not counted: a prefix cache may skip them);
    - weights: a decode step reads each GPU's share of the weights from HBM at least once (the input
      embedding is a lookup: not counted; a MoE step at least one token's active experts) and gives
      each running sequence at most one token; at most min(rows, max_num_seqs, concurrency) run."""
    from runjob_core.estimator.arch import arch_from_config, count_params
    from runjob_core.estimator.gpu_peaks import peaks_for
    from runjob_core.estimator.resolve import resolve_model

    layers, _, head = _matmul_params(case)
    gpus = case.get("num_gpus", 1)
    fp8 = case.get("dtype") == "fp8"
    peak, peak_text = _peak_flops(case, fp8)
    flops = case["measured"] * 2 * (layers + head)
    compute = flops / (gpus * peak)
    floors = [("compute", compute,
               f"{case['measured']:,.1f} generated tokens/s x 2 x {(layers + head) / 1e9:.3f} B matmul weights = "
               f"{flops / 1e12:.1f} TFLOPS, {compute:.2f} of {gpus} x {case['gpu']} at {peak_text}")]
    arch = arch_from_config(resolve_model(_model_path(case)).config)
    counts = count_params(arch)
    read = counts["active"] - (0 if arch.tie_embeddings else counts["embedding"])
    tp = case.get("tp") or 1
    step_bytes = read * (1 if fp8 else 2) / tp
    running = min(v for v in (case.get("rows"), case.get("max_num_seqs"), case.get("concurrency")) if v)
    hbm = peaks_for(case["gpu"]).hbm_gb_s * 1e9
    ceiling = running * hbm / step_bytes
    floors.append(("weights", case["measured"] / ceiling,
                   f"{case['measured']:,.1f} generated tokens/s against at most {running:g} sequences x "
                   f"{hbm / 1e9:,.0f} GB/s / {step_bytes / 1e9:.2f} GB of weights per GPU per step (TP {tp}) = "
                   f"{ceiling:,.1f} tokens/s: {case['measured'] / ceiling:.2f} of it"))
    return floors


def predict(case: dict) -> dict:
    """The time object the model gives for *case*'s settings."""
    from runjob_core.estimator import estimate
    from runjob_core.estimator.time_preflight import time_object

    kind = case["kind"]
    model = _model_path(case)
    kw = {"num_gpus": case.get("num_gpus", 1), "dtype": case.get("dtype", "bf16"), "suggest": False}
    if kind == "inference":
        kw.update(engine=case.get("engine", "vllm"), tp=case.get("tp"), concurrency=case.get("concurrency", 1),
                  max_model_len=int(case["input_tokens"] + case["output_tokens"]))
        if case.get("max_num_seqs"):
            kw["max_num_seqs"] = case["max_num_seqs"]
        work = {"input_tokens": float(case["input_tokens"]), "output_tokens": float(case["output_tokens"])}
        if case.get("longest_output_tokens"):
            work["longest_output_tokens"] = float(case["longest_output_tokens"])
        if case.get("rows"):
            work.update(rows=case["rows"], tokens=case["rows"] * case["output_tokens"])
    else:
        kw.update(seq_len=case["seq_len"], batch=case.get("batch", 1), zero_stage=case.get("zero_stage", 0),
                  grad_checkpointing=case.get("grad_checkpointing", False))
        if case.get("tp"):
            kw["tp"] = case["tp"]
        if case.get("compile"):
            kw["torch_compile"] = True
        if case.get("nf4_backend"):
            kw["nf4_backend"] = case["nf4_backend"]
        if case.get("pure_bf16"):
            kw.update(master_weights=False, optimizer="adamw_fused")
        work = {}
    est = estimate(model, kind, case["gpu"], **kw)
    return time_object(est, model, work=work, framework=case.get("framework", "hf"),
                       precision=case.get("precision", "bf16"), grad_accum=case.get("grad_accum", 1),
                       nodes=case.get("nodes", 1), transformers_version=case.get("transformers_version"))


def score(cases: list[dict]) -> list[dict]:
    rows = []
    for case in cases:
        got = predict(case)["tokens_per_s"]
        ratio = got / case["measured"]
        rows.append({"id": case["id"], "group": case["kind"] if case["kind"] == "inference" else "training",
                     "engine": case.get("engine") or case.get("framework", "hf"), "gpu": case["gpu"],
                     "measured": case["measured"], "predicted": got, "ratio": ratio,
                     "error": max(ratio, 1 / ratio)})
    return rows


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    return {"cases": n, "within_1.5x": sum(r["error"] <= 1.5 for r in rows) / n if n else 0.0,
            "within_2x": sum(r["error"] <= 2.0 for r in rows) / n if n else 0.0}


def table(rows: list[dict]) -> str:
    lines = [f"{'case':44} {'engine':10} {'gpu':10} {'measured':>10} {'predicted':>10} {'ratio':>6}"]
    for r in rows:
        lines.append(f"{r['id'][:44]:44} {r['engine'][:10]:10} {r['gpu'][:10]:10} {r['measured']:>10,.0f} "
                     f"{r['predicted']:>10,.0f} {r['ratio']:>6.2f}")
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["group"], r["gpu"]), []).append(r)
        groups.setdefault((r["group"], "all"), []).append(r)
    lines.append("")
    for (group, gpu), rs in sorted(groups.items()):
        s = summary(rs)
        lines.append(f"{group:10} {gpu:10} {s['cases']:3} cases  within 1.5x {s['within_1.5x']:.0%}  within 2x {s['within_2x']:.0%}")
    s = summary(rows)
    lines.append(f"{'all':21} {s['cases']:3} cases  within 1.5x {s['within_1.5x']:.0%}  within 2x {s['within_2x']:.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "heldout"
    print(table(score(load(name))))
    left_out = [c["id"] for c in load(name, invalid=True) if "invalid" in c]
    print(f"{len(left_out)} case(s) marked invalid and left out of the scoring" + "".join(f"\n  {i}" for i in left_out))
