"""lm-evaluation-harness's output, as written by ``--output_path DIR --log_samples`` (0.4.x).

The layout, from lm_eval/loggers/evaluation_tracker.py (``save_results_aggregated`` and
``save_results_samples``)::

    DIR/<model_name_sanitized>/results_<date_id>.json        aggregate scores, config, versions
    DIR/<model_name_sanitized>/samples_<task>_<date_id>.jsonl  one line per (doc, filter)

``date_id`` is ``datetime.now().isoformat()`` with ``:`` replaced by ``-``, so names sort by
time; a folder holding several runs is read as its newest run of each task. In the results
file, ``results[task]`` maps ``"<metric>,<filter>"`` to a number (``"acc,none"``,
``"acc_stderr,none"``) beside ``alias``/``name``/``sample_len``. A sample line carries
``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``,
``metrics`` (the metric names) and each metric's value under its name.

Each sample becomes one row: ``id`` (``task/doc_id``, with ``/filter`` when not ``none``),
``task``, ``doc_id``, ``filter``, ``target`` (as text; a choice task's index as the choice),
``response`` (the filtered response:
the generated text, or for a loglikelihood choice task the continuation with the highest
log-likelihood), ``metric`` and ``score`` (the sample's first numeric metric: tasks differ in
their metrics, and one column every row fills is what validation and the report check) and
``metrics`` (every metric of the sample by name). Aggregates
drop the ``,none`` filter suffix: ``{"tiny_sum": {"acc": 0.4, "acc_stderr": 0.11}}``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from runjob_core.models import ResultsTable

SOURCE = "runjob-core"
_DATE = r"\d{4}-\d{2}-\d{2}T[0-9.\-]+"
_RESULTS = re.compile(rf"^results_({_DATE})\.json$")
_SAMPLES = re.compile(rf"^samples_(.+)_({_DATE})\.jsonl$")
#: Entries of ``results[task]`` that are not scores.
_NOT_SCORES = ("alias", "name", "sample_len")


def read(folder: Path) -> ResultsTable | None:
    """The table of lm-eval's files under *folder*, or None when it holds none."""
    results = sorted((m.group(1), p) for p in folder.rglob("results_*.json") if (m := _RESULTS.match(p.name)))
    newest_samples: dict[str, tuple[str, Path]] = {}
    for path in folder.rglob("samples_*.jsonl"):
        match = _SAMPLES.match(path.name)
        if match and (match.group(1) not in newest_samples or match.group(2) > newest_samples[match.group(1)][0]):
            newest_samples[match.group(1)] = (match.group(2), path)
    tasks: dict[str, dict[str, float]] = {}
    files: list[Path] = []
    for _, path in results:  # oldest first: a newer run of a task replaces the older one
        aggregate = _aggregate(path)
        if aggregate is not None:
            tasks.update(aggregate)
            files.append(path)
    if not files and not newest_samples:
        return None
    rows: list[dict[str, Any]] = []
    for task in sorted(newest_samples):
        path = newest_samples[task][1]
        files.append(path)
        rows += _sample_rows(task, path)
    return ResultsTable(source=SOURCE, reader="lm-eval", rows=tuple(rows), tasks=tasks,
                        files=tuple(sorted(p.relative_to(folder).as_posix() for p in files)))


def _aggregate(path: Path) -> dict[str, dict[str, float]] | None:
    """``results`` of one results file, metric names without the ``,none`` filter; None if it is not lm-eval's."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        return None
    out: dict[str, dict[str, float]] = {}
    for task, entry in data["results"].items():
        if not isinstance(entry, dict):
            continue
        scores = {}
        for key, value in entry.items():
            if key in _NOT_SCORES or not _is_number(value):
                continue  # lm-eval writes "N/A" for a stderr it could not compute
            metric, _, filter_name = key.partition(",")
            scores[metric if filter_name in ("", "none") else key] = value
        out[task] = scores
    return out


def _sample_rows(task: str, path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                sample = json.loads(line)
            except ValueError:
                continue  # a line cut by a job that was killed while writing: not a sample
            if isinstance(sample, dict):
                rows.append(_row(task, sample))
    return rows


def _row(task: str, sample: dict[str, Any]) -> dict[str, Any]:
    filter_name = sample.get("filter") or "none"
    doc_id = sample.get("doc_id")
    target = _choice_text(sample, sample.get("target"))
    row: dict[str, Any] = {
        "id": f"{task}/{doc_id}" + ("" if filter_name == "none" else f"/{filter_name}"),
        "task": task, "doc_id": doc_id, "filter": filter_name,
        "target": target if isinstance(target, str) or target is None else json.dumps(target, ensure_ascii=False),
        "response": _response(sample),
    }
    metrics = {metric: sample.get(metric) for metric in sample.get("metrics") or ()}
    scored = next((name for name, value in metrics.items() if _is_number(value)), None)
    row.update(metric=scored, score=float(metrics[scored]) if scored else None, metrics=metrics)
    return row


def _response(sample: dict[str, Any]) -> str | None:
    """The generated text; for loglikelihood choices, the continuation the model scored highest."""
    filtered = sample.get("filtered_resps")
    if isinstance(filtered, str):
        return filtered
    if not isinstance(filtered, list) or not filtered:
        return None
    if isinstance(filtered[0], str):
        return filtered[0]
    # multiple_choice: [[loglikelihood, is_greedy], ...] per choice (numbers written as text)
    logliks = [_float(pair[0]) if isinstance(pair, (list, tuple)) and pair else None for pair in filtered]
    if any(v is None for v in logliks):
        return json.dumps(filtered)
    best = max(range(len(logliks)), key=lambda i: logliks[i])
    argument = (sample.get("arguments") or {}).get(f"gen_args_{best}")
    if isinstance(argument, dict) and isinstance(argument.get("arg_1"), str):
        return argument["arg_1"].strip()
    return str(best)


def _choice_text(sample: dict[str, Any], target: Any):
    """A choice task's target index as the choice's text (the response is a text too)."""
    index = int(target) if isinstance(target, int) or (isinstance(target, str) and target.isdigit()) else None
    argument = (sample.get("arguments") or {}).get(f"gen_args_{index}") if index is not None else None
    if isinstance(argument, dict) and isinstance(argument.get("arg_1"), str) and "gen_args_1" in sample["arguments"]:
        return argument["arg_1"].strip()
    return target


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) or isinstance(value, bool)
