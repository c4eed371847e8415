"""Score the time model on a set of measured rates (tests/estimator/data/time_*.json).

Each case names a model of the built-in table (or a stand-in of the same shape, said in
``stand_in``), the GPU and the settings the source printed, and the rate it measured:
training in tokens per second per GPU, inference in generated tokens per second of the
whole job. ``python tests/estimator/time_eval.py [heldout|tuning]`` prints the table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"


def load(name: str) -> list[dict]:
    return json.loads((DATA / f"time_{name}.json").read_text(encoding="utf-8"))["cases"]


def predict(case: dict) -> dict:
    """The time object the model gives for *case*'s settings."""
    from runjob_core.estimator import estimate
    from runjob_core.estimator.time_preflight import time_object

    kind = case["kind"]
    model = str(DATA / case["model"]) if case["model"].startswith("configs/") else case["model"]
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
    print(table(score(load(sys.argv[1] if len(sys.argv) > 1 else "heldout"))))
