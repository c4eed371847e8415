"""Validation against published measurements (tests/estimator/data/measurements.json).

Each case: a model, a job kind, settings, the quantity a public source measured, its value
and unit, the source URL and the tolerance the estimate must meet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runjob_core.estimator import estimate

GIB = 1 << 30
DATA = Path(__file__).parent / "data" / "measurements.json"
CASES = json.loads(DATA.read_text(encoding="utf-8"))["cases"]
FIELDS = {"id", "model", "kind", "gpu", "settings", "quantity", "value", "unit", "relation",
          "tolerance", "source", "note"}


def test_at_least_25_cases_with_sources():
    assert len(CASES) >= 25
    assert len({c["id"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert FIELDS <= set(c), c["id"]
        assert c["source"].startswith("https://"), c["id"]
        assert c["unit"] in ("GiB", "GB", "tokens", "bool"), c["id"]
        assert c["relation"] in ("eq", "ge", "le"), c["id"]
        assert 0 <= c["tolerance"] <= 0.25, c["id"]


def _expected(c):
    v = c["value"]
    return v * 1e9 / GIB if c["unit"] == "GB" else v


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_measurement(case, tmp_path):
    model = case["model"]
    if "model_config" in case:
        (tmp_path / "config.json").write_text(json.dumps(case["model_config"]))
        model = str(tmp_path)
    est = estimate(model, case["kind"], case["gpu"], **case["settings"]).to_json()
    got = est[case["quantity"]]
    want = _expected(case)
    if case["unit"] == "bool":
        assert got is want, f"{case['id']}: estimate says {got}, source says {want} ({case['source']})"
    elif case["relation"] == "ge":
        assert got >= want, f"{case['id']}: {got} < {want}"
    elif case["relation"] == "le":
        assert got <= want, f"{case['id']}: {got} > {want}"
    else:
        rel = got / want - 1
        assert abs(rel) <= case["tolerance"], (
            f"{case['id']}: estimate {got:.4g} vs measured {want:.4g} ({rel:+.1%}, "
            f"tolerance {case['tolerance']:.0%}; {case['source']})"
        )
