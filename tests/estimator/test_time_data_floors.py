"""A data-validity audit of the time sets, independent of the time model: a measured rate that needs more than
the GPUs' datasheet peak (FLOPs, or HBM bytes for decode) under the case's own recorded settings cannot be a
measurement of those settings. Such a case is kept in its file, marked ``invalid`` with the arithmetic, and left
out of the scoring; every other case is scored however badly the model does on it. The floors are in
``time_eval.py`` (test code, not the model): every term they leave out would only add work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import time_eval  # noqa: E402

SETS = ("heldout", "tuning")


def _cases():
    return [(name, case) for name in SETS for case in time_eval.load(name, invalid=True)]


def _worst_floor(case: dict) -> tuple[float, str]:
    if case["kind"] == "inference":
        _, share, how = max(time_eval.inference_floors(case), key=lambda floor: floor[1])
        return share, how
    return time_eval.training_floor(case)


def test_no_training_case_needs_more_than_the_dense_peak():
    """Every training case of both sets, invalid ones included: tokens/s per GPU x the least FLOPs per token of
    its recorded settings fits one GPU's dense peak (BF16, FP8 where the case runs FP8), or the case says why not."""
    over = []
    for name, case in _cases():
        if case["kind"] == "inference":
            continue
        share, how = time_eval.training_floor(case)
        assert share > 0.05, (case["id"], how)  # a floor that counts nothing would pass everything
        if share > 1.0 and "invalid" not in case:
            over.append(f"{name}: {case['id']}: {how}")
    assert not over, "\n".join(over)


def test_no_inference_case_beats_its_floors():
    """Every inference case of both sets: its generated tokens/s fits the job's GPUs at their dense peak (2 x
    matmul weights per generated token) and the HBM bound of decode (each GPU's weight share read once per step,
    one token per running sequence per step)."""
    over = []
    for name, case in _cases():
        if case["kind"] != "inference":
            continue
        floors = time_eval.inference_floors(case)
        assert [floor for floor, _, _ in floors] == ["compute", "weights"]
        over += [f"{name}: {case['id']}: {how}" for _, share, how in floors if share > 1.0 and "invalid" not in case]
    assert not over, "\n".join(over)


def test_a_case_is_marked_invalid_only_when_it_fails_a_floor_and_says_by_how_much():
    """The mark cannot hide a miss: a case marked invalid fails a floor, and its reason carries the figure."""
    marked = [case for _, case in _cases() if "invalid" in case]
    assert marked
    for case in marked:
        share, how = _worst_floor(case)
        assert share > 1.0, (case["id"], how)
        assert f"{share:.2f}" in case["invalid"] and case["url"] and case["quote"], case["id"]


def test_invalid_cases_stay_in_the_file_and_out_of_the_scoring():
    every = time_eval.load("heldout", invalid=True)
    scored = time_eval.load("heldout")
    invalid = [case["id"] for case in every if "invalid" in case]
    assert len(scored) == len(every) - len(invalid) and not {c["id"] for c in scored} & set(invalid)
    assert {row["id"] for row in time_eval.score(scored)} == {c["id"] for c in scored}
    printed = subprocess.run([sys.executable, str(Path(time_eval.__file__)), "heldout"], capture_output=True,
                             text=True, check=True).stdout
    assert f"{len(invalid)} case(s) marked invalid and left out of the scoring" in printed
    assert f"{'all':21} {len(scored):3} cases" in printed and all(i in printed for i in invalid)


# Llama-3.1-8B by hand from its config: hidden 4096, 32 layers, 32 query and 8 KV heads of 128, MLP 14336 (gated),
# vocabulary 128256, untied head.
LAYER = 4096 * (4096 + 2 * 8 * 128 + 4096) + 3 * 4096 * 14336  # q, k, v, o + gate, up, down = 218,103,808
LAYERS = 32 * LAYER
HEAD = 128256 * 4096
TRAINING = {"id": "hand count", "model": "Llama-3.1-8B", "gpu": "H100-80GB", "measured": 1000.0}


@pytest.mark.parametrize(("settings", "flops_per_token"), [
    ({"kind": "full_ft"}, 6 * (LAYERS + HEAD)),
    ({"kind": "full_ft", "grad_checkpointing": True}, 6 * (LAYERS + HEAD) + 2 * LAYERS),
    ({"kind": "lora"}, 2 * (LAYERS + HEAD) + 2 * (LAYERS + HEAD - LAYER)),
    ({"kind": "qlora", "grad_checkpointing": True}, 2 * (LAYERS + HEAD) + 2 * (LAYERS + HEAD - LAYER) + 2 * LAYERS),
    # selective activation checkpointing recomputes a share the case does not record: none counted
    ({"kind": "full_ft", "grad_checkpointing": True, "id": "sel-AC hand count"}, 6 * (LAYERS + HEAD)),
    ({"kind": "full_ft", "precision": "fp8"}, 6 * (LAYERS + HEAD)),
])
def test_the_training_floor_is_the_hand_count(settings, flops_per_token):
    share, how = time_eval.training_floor({**TRAINING, **settings})
    peak = 1979e12 if settings.get("precision") == "fp8" else 989e12
    assert share == pytest.approx(1000.0 * flops_per_token / peak)
    assert f"{flops_per_token / 1e9:.2f} GFLOPs per token" in how


def test_the_inference_floors_are_the_hand_count():
    """Llama-3.1-8B on 2 x H100 at TP 2, 4 running sequences: compute over both GPUs; the weights a step reads are
    everything but the input embedding (a lookup), half of them per GPU."""
    case = {"id": "hand count", "kind": "inference", "model": "Llama-3.1-8B", "gpu": "H100-80GB", "num_gpus": 2,
            "tp": 2, "rows": 100, "max_num_seqs": 4, "measured": 500.0, "input_tokens": 10, "output_tokens": 10}
    (_, compute, _), (_, weights, how) = time_eval.inference_floors(case)
    assert compute == pytest.approx(500.0 * 2 * (LAYERS + HEAD) / (2 * 989e12))
    read = LAYERS + HEAD + (2 * 32 + 1) * 4096  # + the norms
    assert weights == pytest.approx(500.0 / (4 * 3350e9 / (read * 2 / 2)))
    assert "at most 4 sequences" in how
    fp8 = time_eval.inference_floors({**case, "dtype": "fp8"})
    assert fp8[0][1] == pytest.approx(compute * 989 / 1979) and fp8[1][1] == pytest.approx(weights / 2)


def test_a_moe_token_counts_its_active_experts_only():
    """Qwen3-30B-A3B (48 layers, hidden 2048, 32 x 128 query and 4 x 128 KV heads, 8 of 128 experts of 768):
    the compute floor counts the routed experts, not all 128."""
    case = {"id": "hand count", "kind": "inference", "model": "Qwen3-30B-A3B", "gpu": "H20", "rows": 1,
            "measured": 100.0, "input_tokens": 1, "output_tokens": 10}
    attention = 2048 * 4096 * 2 + 2 * 2048 * 512
    experts = 8 * 3 * 2048 * 768
    (_, compute, _), _ = time_eval.inference_floors(case)
    from runjob_core.estimator.gpu_peaks import peaks_for

    assert compute == pytest.approx(100.0 * 2 * (48 * (attention + experts) + 151936 * 2048)
                                    / (peaks_for("H20").bf16_tflops * 1e12))
