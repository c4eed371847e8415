"""Accuracy on HELD-OUT published measurements (tests/estimator/data/heldout.json).

These cases were collected after the estimator's formulas and constants were written; no
constant was set from them (see the file's description). The issue's goal is an aggregate
one: at least 80 % of the numbers within their tolerance (35 %) and at least 95 % of the
fits/OOM verdicts right. Individual misses are printed, not hidden: run
``python tests/estimator/test_estimator_heldout.py`` for the per-case table.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
from pathlib import Path

GIB = 1 << 30
DATA = Path(__file__).parent / "data" / "heldout.json"
CASES = json.loads(DATA.read_text(encoding="utf-8"))["cases"]
#: The tuning set: what the formulas were checked against while they were written.
TUNING = json.loads((Path(__file__).parent / "data" / "tuning.json").read_text(encoding="utf-8"))["cases"]
UNITS = {"GiB": 1.0, "GB": 1e9 / GIB, "MiB": 1.0 / 1024}


def expected(case):
    v = case["value"]
    return v * UNITS[case["unit"]] if case["unit"] in UNITS else v


def got(est_json, quantity):
    if quantity in est_json:
        return est_json[quantity]
    return est_json.get("breakdown", {}).get(quantity)


def evaluate(estimate, cases=CASES, *, drop_unknown=False):
    """Run every case; returns a list of (case, value or None, ok, error text).

    ``drop_unknown`` removes settings ``estimate`` does not accept (to score an older
    estimator on the same cases: it then answers as if the setting were absent).
    """
    accepted = set(inspect.signature(estimate).parameters)
    out = []
    for case in cases:
        settings = dict(case["settings"])
        if drop_unknown:
            settings = {k: v for k, v in settings.items() if k in accepted}
        with tempfile.TemporaryDirectory() as tmp:
            model = case["model"]
            if "model_config" in case:
                folder = Path(tmp) / case["model"]
                folder.mkdir()
                (folder / "config.json").write_text(json.dumps(case["model_config"]))
                model = str(folder)
            try:
                est = estimate(model, case["kind"], case["gpu"], **settings).to_json()
            except Exception as exc:  # noqa: BLE001 - an old estimator may reject a case; that is a miss, reported
                out.append((case, None, False, f"{type(exc).__name__}: {exc}"))
                continue
        value = got(est, case["quantity"])
        want = expected(case)
        if value is None:
            ok = False
        elif case["unit"] == "bool":
            ok = value is want
        else:
            ok = abs(value / want - 1) <= case["tolerance"]
        out.append((case, value, ok, ""))
    return out


def summary(results):
    numbers = [r for r in results if r[0]["unit"] != "bool"]
    verdicts = [r for r in results if r[0]["unit"] == "bool"]
    return (sum(r[2] for r in numbers), len(numbers), sum(r[2] for r in verdicts), len(verdicts))


def test_heldout_cases_name_public_sources():
    assert len({c["id"] for c in CASES}) == len(CASES)
    for c in CASES:
        # a public page, or a measurement of this project's own (the H200 run, with its script and results)
        assert c["source"].startswith(("https://", "this project: ")), c["id"]
        assert c["note"], c["id"]
        assert c["unit"] in ("GiB", "GB", "MiB", "tokens", "bool"), c["id"]
    numbers = [c for c in CASES if c["unit"] != "bool"]
    assert len(numbers) >= 30 and len(CASES) - len(numbers) >= 15
    assert all(c["tolerance"] == 0.35 for c in numbers)


def test_tuning_cases_are_apart_from_the_heldout_ones():
    assert not {c["id"] for c in TUNING} & {c["id"] for c in CASES}
    for c in TUNING:
        assert c["source"].startswith(("https://", "this project: ")) and c["note"], c["id"]


def by_family(results):
    """{family: (numbers ok, numbers, verdicts ok, verdicts)} in the order families first appear."""
    out = {}
    for r in results:
        fam = r[0].get("family", "")
        n_ok, n, v_ok, v = out.get(fam, (0, 0, 0, 0))
        if r[0]["unit"] == "bool":
            v_ok, v = v_ok + r[2], v + 1
        else:
            n_ok, n = n_ok + r[2], n + 1
        out[fam] = (n_ok, n, v_ok, v)
    return out


def test_heldout_accuracy_meets_the_goal():
    from runjob_core.estimator import estimate

    results = evaluate(estimate)
    errors = [f"{r[0]['id']}: {r[3]}" for r in results if r[3]]
    assert not errors, errors
    n_ok, n, v_ok, v = summary(results)
    table = "\n".join(_rows(results))
    assert n_ok >= 0.8 * n, f"{n_ok}/{n} numbers within tolerance\n{table}"
    assert v_ok >= 0.95 * v, f"{v_ok}/{v} verdicts right\n{table}"


def _rows(results):
    for case, value, ok, err in results:
        want = expected(case)
        if err:
            yield f"MISS  {case['id']}: {err}"
        elif case["unit"] == "bool":
            yield f"{'ok  ' if ok else 'MISS'}  {case['id']}: estimate fits={value}, source {want}"
        else:
            rel = (value / want - 1) if value is not None else float("nan")
            yield f"{'ok  ' if ok else 'MISS'}  {case['id']}: estimate {value if value is None else round(value, 3)} vs {round(want, 3)} ({rel:+.0%})"


if __name__ == "__main__":  # python tests/estimator/test_estimator_heldout.py [--old] [--tuning]
    from runjob_core.estimator import estimate

    res = evaluate(estimate, TUNING if "--tuning" in sys.argv else CASES, drop_unknown="--old" in sys.argv)
    print("\n".join(_rows(res)))
    for fam, (f_nok, f_n, f_vok, f_v) in by_family(res).items():
        print(f"{fam or '-'}: numbers {f_nok}/{f_n}, verdicts {f_vok}/{f_v}")
    n_ok, n, v_ok, v = summary(res)
    print(f"numbers within tolerance: {n_ok}/{n} ({n_ok / max(1, n):.0%}); "
          f"verdicts right: {v_ok}/{v} ({v_ok / max(1, v):.0%})")
