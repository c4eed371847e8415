"""Exact statistics of a job's results table (JSONL rows), and representative samples.

Every number is computed from every row, never sampled, with documented definitions so a
report can be checked by hand:

- median: :func:`statistics.median` (the mean of the two middle values for an even count);
- percentiles p50/p90/p99: nearest rank, ``sorted(v)[ceil(p / 100 * n) - 1]``;
- token lengths: the first integer column among :data:`TOKEN_FIELDS`; without one, an
  approximation of ``ceil(characters / 4)`` of the response (marked ``approximate``);
- truncated: ``finish_reason == "length"`` when the rows have a finish reason, else a token
  length at or above the job's ``max_tokens`` (only from a real token column);
- empty: a response that is missing, null, or only whitespace;
- duplicate keys: rows whose key (:data:`KEY_FIELDS`) appeared in an earlier row.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

SCORE_FIELDS = ("score", "correct", "is_correct", "accuracy", "acc", "reward", "exact_match")
CATEGORY_FIELDS = ("category", "subject", "task", "domain")
TOKEN_FIELDS = ("output_tokens", "completion_tokens", "num_output_tokens", "response_tokens", "num_tokens", "n_tokens",
                "token_count", "tokens")
RESPONSE_FIELDS = ("response", "output", "completion", "generation", "prediction", "text")
KEY_FIELDS = ("id", "key", "idx", "example_id", "question_id", "uid")
#: Samples are cut to this many characters per value for the terminal (full in --md/--json).
TERMINAL_CHARS = 200


def load_rows(folder: Path) -> tuple[list[dict[str, Any]], list[str], int]:
    """Every JSON object row of every .jsonl file under *folder* (sorted by path)."""
    files = sorted(folder.rglob("*.jsonl")) if folder.is_dir() else []
    rows: list[dict[str, Any]] = []
    bad = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                if isinstance(value, dict):
                    rows.append(value)
                else:
                    bad += 1
    return rows, [str(p) for p in files], bad


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return None


def _pick(rows: list[dict[str, Any]], names: tuple[str, ...], test) -> str | None:
    """The first candidate column that more than half of the rows have a fitting value for."""
    for name in names:
        if sum(1 for r in rows if name in r and test(r[name])) * 2 > len(rows):
            return name
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _round(x: float) -> float:
    return round(x, 6)


def score_fields(rows: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(score field, category field) of *rows*, picked as :func:`summarise` picks them, without
    the rest of the statistics (a sweep's report reads a thousand folders)."""
    if not rows:
        return None, None
    return (_pick(rows, SCORE_FIELDS, lambda v: _number(v) is not None),
            _pick(rows, CATEGORY_FIELDS, lambda v: isinstance(v, str) and v != ""))


def summarise(rows: list[dict[str, Any]], *, max_tokens: int | None = None) -> dict[str, Any]:
    """The statistics above for *rows*; fields that do not apply are left out."""
    n = len(rows)
    out: dict[str, Any] = {"rows": n}
    if not n:
        return out
    score_field = _pick(rows, SCORE_FIELDS, lambda v: _number(v) is not None)
    token_field = _pick(rows, TOKEN_FIELDS, _is_int)
    response_field = _pick(rows, RESPONSE_FIELDS, lambda v: v is None or isinstance(v, str))
    category_field = _pick(rows, CATEGORY_FIELDS, lambda v: isinstance(v, str) and v != "")
    key_field = _pick(rows, KEY_FIELDS, lambda v: v is not None)
    out["fields"] = {"score": score_field, "tokens": token_field, "response": response_field,
                     "category": category_field, "key": key_field}
    scores = [s for s in (_number(r.get(score_field)) for r in rows)] if score_field else []
    if score_field:
        values = [s for s in scores if s is not None]
        out["score"] = _score_stats(values, n)
        if values:
            out["score"]["histogram"] = histogram(values, bins=min(20, max(2, len(set(values)))))
        if category_field:
            groups: dict[str, list[float]] = {}
            for row, score in zip(rows, scores):
                if score is not None:
                    groups.setdefault(str(row.get(category_field) or "(none)"), []).append(score)
            out["score_by_category"] = {name: {"rows": len(v), "mean": _round(statistics.fmean(v))}
                                        for name, v in sorted(groups.items())}
    lengths = token_lengths(rows, token_field, response_field)
    if lengths:
        ordered = sorted(lengths)
        out["tokens"] = {"field": token_field or f"ceil(len({response_field}) / 4)", "approximate": token_field is None,
                         "min": ordered[0], "max": ordered[-1], "p50": percentile(ordered, 50),
                         "p90": percentile(ordered, 90), "p99": percentile(ordered, 99)}
        out["tokens"]["outliers"] = _outliers(ordered)
        out["tokens"]["histogram"] = histogram(ordered)
    truncated = truncated_rows(rows, token_field, max_tokens)
    if truncated is not None:
        out["truncated"] = {"rows": len(truncated), "rate": _round(len(truncated) / n),
                            "rule": "finish_reason == length" if any("finish_reason" in r for r in rows)
                            else f"{token_field} >= max_tokens {max_tokens}"}
    if response_field:
        empty = sum(1 for r in rows if not isinstance(r.get(response_field), str) or not r[response_field].strip())
        out["empty"] = {"field": response_field, "rows": empty, "rate": _round(empty / n)}
    if key_field:
        seen: set[str] = set()
        duplicates = 0
        for row in rows:
            key = json.dumps(row.get(key_field), sort_keys=True)
            duplicates += key in seen
            seen.add(key)
        out["duplicate_keys"] = {"field": key_field, "rows": duplicates}
    return out


def histogram(values: list[float], bins: int = 20) -> dict[str, list]:
    """Equal-width bins from min to max (the last bin includes max); one bin if all are equal."""
    lo, hi = min(values), max(values)
    if hi == lo:
        return {"edges": [lo - 0.5, hi + 0.5], "counts": [len(values)]}
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return {"edges": [_round(lo + width * i) for i in range(bins + 1)], "counts": counts}


def _score_stats(values: list[float], n: int) -> dict[str, Any]:
    if not values:
        return {"rows": 0, "missing": n}
    return {"rows": len(values), "missing": n - len(values), "mean": _round(statistics.fmean(values)),
            "median": _round(statistics.median(values)), "min": min(values), "max": max(values),
            "zeros": sum(1 for v in values if v == 0), "ones": sum(1 for v in values if v == 1)}


def _outliers(ordered: list[int]) -> int:
    """Token lengths above Q3 + 3 x IQR (nearest-rank quartiles): far out, not just long."""
    if len(ordered) < 8:
        return 0
    q1, q3 = percentile(ordered, 25), percentile(ordered, 75)
    fence = q3 + 3 * (q3 - q1)
    return sum(1 for v in ordered if v > fence) if q3 > q1 else 0


def token_lengths(rows: list[dict[str, Any]], token_field: str | None, response_field: str | None) -> list[int]:
    if token_field:
        return [r[token_field] for r in rows if _is_int(r.get(token_field))]
    if response_field:
        return [math.ceil(len(r[response_field]) / 4) for r in rows if isinstance(r.get(response_field), str)]
    return []


def truncated_rows(rows: list[dict[str, Any]], token_field: str | None, max_tokens: int | None) -> list[int] | None:
    """Indexes of truncated rows; None when truncation cannot be told from these rows."""
    if any("finish_reason" in r for r in rows):
        return [i for i, r in enumerate(rows) if r.get("finish_reason") == "length"]
    if token_field and max_tokens:
        return [i for i, r in enumerate(rows) if _is_int(r.get(token_field)) and r[token_field] >= max_tokens]
    return None


def samples(rows: list[dict[str, Any]], summary: dict[str, Any], *, max_tokens: int | None = None) -> list[dict[str, Any]]:
    """3-5 representative rows: best, median and worst by score, one truncated and one empty
    if there are any; the first rows when there is no score."""
    if not rows:
        return []
    fields = summary.get("fields", {})
    score_field = fields.get("score")
    picks: list[tuple[str, int]] = []
    scored = [(s, i) for i, r in enumerate(rows) if (s := _number(r.get(score_field))) is not None] if score_field else []
    if scored:
        scored.sort()
        picks += [("best", scored[-1][1]), ("median", scored[(len(scored) - 1) // 2][1]), ("worst", scored[0][1])]
    else:
        picks += [("row", i) for i in range(min(3, len(rows)))]
    truncated = truncated_rows(rows, fields.get("tokens"), max_tokens) or []
    if truncated:
        picks.append(("truncated", truncated[0]))
    response_field = fields.get("response")
    if response_field:
        empty = next((i for i, r in enumerate(rows)
                      if not isinstance(r.get(response_field), str) or not r[response_field].strip()), None)
        if empty is not None:
            picks.append(("empty response", empty))
    out: list[dict[str, Any]] = []
    used: set[int] = set()
    for why, index in picks:
        if index in used or len(out) == 5:
            continue
        used.add(index)
        out.append({"why": why, "index": index, "row": rows[index]})
    return out


def cut(row: dict[str, Any], limit: int = TERMINAL_CHARS) -> dict[str, Any]:
    """A row with long text values cut for the terminal."""
    return {k: (v[:limit] + f"... ({len(v)} chars)" if isinstance(v, str) and len(v) > limit else v) for k, v in row.items()}
