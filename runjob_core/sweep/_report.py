"""One report over a sweep's elements (``runjob report SWEEP``): per element its varying values,
state, rows, score mean / median with a 95% interval, GPU-hours and cost; the best element and
its margin over the next (do their intervals overlap?); the score per category across elements;
a pivot when two keys vary.

Built from the store and each element's collected results folder only. The interval of a 0/1
score is Wilson's binomial interval; of any other score a percentile bootstrap of the mean
(2,000 resamples, seeded: the same folder gives the same interval every time).
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from typing import Any

from runjob_core.collecting import manifest as _results_folder
from runjob_core.collecting import results_folder
from runjob_core.reporting import results as results_mod
from runjob_core.store import SweepRow

#: Two-sided 95%.
Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(values: list[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval (2.5%, 97.5%) of the mean."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples))
    return (means[int(0.025 * (resamples - 1))], means[int(math.ceil(0.975 * (resamples - 1)))])


def score_stats(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    binary = all(v in (0.0, 1.0) for v in values)
    low, high = wilson(int(sum(values)), len(values)) if binary else bootstrap(values)
    return {"n": len(values), "mean": statistics.fmean(values), "median": statistics.median(values),
            "ci_low": low, "ci_high": high, "method": "wilson" if binary else "bootstrap"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _results(row, hook) -> tuple[int, list[float], dict[str, list[float]], str | None]:
    """(rows, scores, scores by category, score field) of an element's collected results."""
    from runjob_core import readers

    dest = _results_folder.folder_of(results_folder(row), row.id)
    if dest is None:
        return 0, [], {}, None
    from cattrs.errors import BaseValidationError

    from runjob_core.errors import RunjobError

    try:
        spec = row.spec
    except (RunjobError, ValueError, BaseValidationError):  # a spec another runjob version stored: read the folder without it
        spec = None
    table = readers.read(dest, spec, hook)
    rows = list(table.rows) if table is not None else results_mod.load_rows(dest)[0]
    field, category = results_mod.score_fields(rows)
    if field is None:
        return len(rows), [], {}, None
    scores, groups = [], {}
    for r in rows:
        value = _number(r.get(field))
        if value is None:
            continue
        scores.append(value)
        if category:
            groups.setdefault(str(r.get(category) or "(none)"), []).append(value)
    return len(rows), scores, groups, field


def build(store, row: SweepRow, *, clusters: dict | None = None, hook=None, now: float | None = None) -> dict[str, Any]:
    from runjob_core.reporting.report import usage
    from runjob_core.sweep import _run

    now = time.time() if now is None else now
    recorded = row.elements
    keys = list(dict.fromkeys(k for e in recorded for k in e["values"]))
    varying = [k for k in keys if len({json.dumps(e["values"].get(k), sort_keys=True, default=str) for e in recorded}) > 1]
    jobs = _run.element_jobs(store, row.id)
    table = {e["index"]: e for e in _run.elements(store, row)}
    elements, categories, fields = [], {}, set()
    for element in recorded:
        job = jobs.get(element["index"])
        entry = {"index": element["index"], "name": element["name"], "job": element["job"],
                 "job_id": job.id if job else None, "values": {k: element["values"].get(k) for k in varying},
                 "state": table[element["index"]]["state"], "done": table[element["index"]]["done"],
                 "rows": 0, "score": None, "gpu_hours": 0.0, "cost_usd": None}
        if job is not None:
            n, scores, groups, field = _results(job, hook)
            fields.update([field] if field else [])
            spent = usage(store, job, clusters=clusters or {}, now=now)
            entry.update(rows=n, score=score_stats(scores), gpu_hours=spent["gpu_hours"], cost_usd=spent["cost"])
            for name, values in groups.items():
                categories.setdefault(name, {})[element["name"]] = statistics.fmean(values)
        elements.append(entry)
    report = {
        "sweep": {"id": row.id, "name": row.name, "state": row.state, "spec_hash": row.spec_hash,
                  "elements": len(recorded), "done": sum(e["done"] for e in elements), "varying": varying,
                  "score_field": sorted(fields)[0] if len(fields) == 1 else sorted(fields) or None,
                  "gpu_hours": round(sum(e["gpu_hours"] or 0 for e in elements), 4),
                  "cost_usd": round(sum(e["cost_usd"] for e in elements if e["cost_usd"] is not None), 2)
                  if any(e["cost_usd"] is not None for e in elements) else None},
        "elements": elements,
        "best": best(elements),
        "categories": categories or None,
        "pivot": pivot(elements, varying) if len(varying) == 2 else None,
    }
    return report


def best(elements: list[dict]) -> dict[str, Any] | None:
    """The element with the highest mean score, its margin over the next, and whether their
    95% intervals overlap (if they do, the ranking may be noise)."""
    scored = sorted((e for e in elements if e["score"]), key=lambda e: e["score"]["mean"], reverse=True)
    if not scored:
        return None
    top = scored[0]
    out = {"index": top["index"], "name": top["name"], "mean": top["score"]["mean"], "next": None, "margin": None,
           "overlap": None}
    if len(scored) > 1:
        second = scored[1]
        out.update(next={"index": second["index"], "name": second["name"], "mean": second["score"]["mean"]},
                   margin=top["score"]["mean"] - second["score"]["mean"],
                   overlap=top["score"]["ci_low"] <= second["score"]["ci_high"])
    return out


def pivot(elements: list[dict], varying: list[str]) -> dict[str, Any]:
    """Mean score by the first varying key (rows) and the second (columns)."""
    rows_key, cols_key = varying
    row_values = list(dict.fromkeys(json.dumps(e["values"][rows_key], default=str) for e in elements))
    col_values = list(dict.fromkeys(json.dumps(e["values"][cols_key], default=str) for e in elements))
    cells: list[list[float | None]] = [[None] * len(col_values) for _ in row_values]
    for e in elements:
        r = row_values.index(json.dumps(e["values"][rows_key], default=str))
        c = col_values.index(json.dumps(e["values"][cols_key], default=str))
        if cells[r][c] is None and e["score"]:
            cells[r][c] = e["score"]["mean"]
    return {"rows": rows_key, "columns": cols_key, "row_values": [json.loads(v) for v in row_values],
            "column_values": [json.loads(v) for v in col_values], "mean": cells}


# ---------------------------------------------------------------------------- rendering


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _values(values: dict) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in values.items())


def element_rows(report: dict) -> tuple[list[str], list[list[str]]]:
    columns = ["#", "element", "values", "state", "rows", "mean", "median", "95% CI", "GPU-h", "cost"]
    rows = []
    for e in report["elements"]:
        s = e["score"] or {}
        ci = f"[{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}]" if s else "-"
        rows.append([str(e["index"]), e["name"], _values(e["values"]), e["state"], str(e["rows"]), _fmt(s.get("mean")),
                     _fmt(s.get("median")), ci, _fmt(e["gpu_hours"], 4),
                     "-" if e["cost_usd"] is None else f"${e['cost_usd']:.2f}"])
    return columns, rows


def best_line(report: dict) -> str:
    top = report["best"]
    if top is None:
        return "best: no element has a score yet"
    if top["next"] is None:
        return f"best: {top['name']} (mean {_fmt(top['mean'])}), the only element with a score"
    noise = ("the 95% intervals overlap: the ranking may be noise" if top["overlap"]
             else "the 95% intervals do not overlap")
    if top["margin"] == 0:
        return f"best: {top['name']} ties with {top['next']['name']} (mean {_fmt(top['mean'])}); {noise}"
    return (f"best: {top['name']} (mean {_fmt(top['mean'])}) beats {top['next']['name']} ({_fmt(top['next']['mean'])}) "
            f"by {_fmt(top['margin'])}; {noise}")


def headline(report: dict) -> str:
    s = report["sweep"]
    cost = f", ${s['cost_usd']:.2f}" if s["cost_usd"] is not None else ""
    return (f"Sweep {s['name']} ({s['id']}, {s['state']}): {s['done']} of {s['elements']} elements done, "
            f"{s['gpu_hours']} GPU-hours{cost}; varying {', '.join(s['varying']) or 'nothing'}")


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")
    return (["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


def pivot_rows(report: dict) -> tuple[list[str], list[list[str]]] | None:
    p = report["pivot"]
    if p is None:
        return None
    columns = [f"{p['rows']} \\ {p['columns']}"] + [json.dumps(v, default=str) for v in p["column_values"]]
    rows = [[json.dumps(rv, default=str)] + [_fmt(c) for c in cells] for rv, cells in zip(p["row_values"], p["mean"])]
    return columns, rows


def category_rows(report: dict) -> tuple[list[str], list[list[str]]] | None:
    cats = report["categories"]
    if not cats:
        return None
    names = [e["name"] for e in report["elements"]]
    columns = ["category"] + names
    return columns, [[name] + [_fmt(by.get(n)) for n in names] for name, by in sorted(cats.items())]


def markdown(report: dict) -> str:
    lines = [f"# {headline(report)}", ""]
    lines += _md_table(*element_rows(report)) + ["", best_line(report), ""]
    for title, part in (("Mean score by " + (report["pivot"] or {}).get("rows", "") + " and "
                         + (report["pivot"] or {}).get("columns", ""), pivot_rows(report)),
                        ("Mean score by category", category_rows(report))):
        if part is not None:
            lines += [f"## {title}", ""] + _md_table(*part) + [""]
    return "\n".join(lines)
