"""The dashboard's sweep pages: ``sweeps.html`` lists the sweeps, ``sweep-<id>.html`` shows one.

A sweep's page is the combined report (:func:`runjob_core.sweep._report.build`, the document
``runjob report SWEEP --json`` prints, so the numbers are the same) as a sortable table, the
best element and its margin, the pivot and the per-category means, and the elements' curves
overlaid on one pair of axes (the loss, else the series every element shares first, as on a
job's page). Every value from the store is escaped, as on every page of the dashboard.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from runjob_core.reporting import svg
from runjob_core.reporting.svg import esc

#: At most this many elements' curves on one chart (the best-scoring ones): more is a blur.
MAX_CURVES = 40


def sweep_page_name(sweep_id: str) -> str:
    return "sweep-" + re.sub(r"[^A-Za-z0-9._-]", "_", sweep_id) + ".html"


def sweep_page(store, row, report: dict[str, Any], *, head: Callable[[str], str], foot: str,
               main_series: Callable[[list[tuple]], str | None], page_name: Callable[[str], str]) -> str:
    """The page of one sweep from its combined *report*."""
    from runjob_core.sweep import _report

    parts = [head(f"runjob: sweep {row.name}"), f"<h1>Sweep {esc(row.name)} <small>{esc(row.id)}</small></h1>",
             f'<p class="headline">{esc(_report.headline(report))}</p>', '<h2>Elements</h2>']
    parts.append(_element_table(report, page_name))
    parts.append(f'<p class="best">{esc(_report.best_line(report))}</p>')
    for title, part, css in ((f"Mean score by {' x '.join(report['sweep']['varying'])}", _report.pivot_rows(report), "pivot"),
                             ("Mean score by category", _report.category_rows(report), "categories")):
        if part is not None:
            parts.append(f"<h2>{esc(title)}</h2>" + _plain_table(*part, css=css))
    parts.append('<h2>Curves</h2><section id="curves">' + _curves(store, report, main_series) + "</section>")
    parts.append(foot)
    return "".join(parts)


def _element_table(report: dict[str, Any], page_name: Callable[[str], str]) -> str:
    from runjob_core.sweep import _report

    columns, rows = _report.element_rows(report)
    numeric = {"#", "rows", "mean", "median", "GPU-h", "cost"}
    out = ['<table id="elements" class="sortable"><thead><tr>']
    out += [f'<th data-type="{"num" if c in numeric else "text"}">{esc(c)}</th>' for c in columns]
    out.append("</tr></thead><tbody>")
    for element, cells in zip(report["elements"], rows):
        score = element["score"] or {}
        sort = {"#": element["index"], "rows": element["rows"], "mean": score.get("mean"), "median": score.get("median"),
                "GPU-h": element["gpu_hours"], "cost": element["cost_usd"]}
        out.append(f'<tr data-element="{element["index"]}" data-job="{esc(element["job_id"] or "")}">')
        for column, cell in zip(columns, cells):
            key = f' data-sort="{esc("" if sort[column] is None else sort[column])}"' if column in sort else ""
            if column == "element" and element["job_id"]:
                cell_html = f'<a href="{page_name(element["job_id"])}">{esc(cell)}</a>'
            elif column == "state":
                cell_html = f'<span class="state state-{esc(cell)}">{esc(cell)}</span>'
            else:
                cell_html = esc(cell)
            out.append(f'<td class="col-{esc(re.sub(r"[^a-z0-9]+", "-", column.lower()))}"{key}>{cell_html}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _plain_table(columns: list[str], rows: list[list[str]], *, css: str) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _curves(store, report: dict[str, Any], main_series: Callable[[list[tuple]], str | None]) -> str:
    """Each element's curve of one series (every attempt, a resume continuing it) on shared axes."""
    jobs, note = _drawn(report)
    points = store.metrics_of([job_id for _i, _n, job_id in jobs]) if jobs else {}
    name = main_series([m for job_points in points.values() for m in job_points])
    if name is None:
        return "<p>No element recorded a metric (runjob_core.job.progress(step=..., loss=...) in the job).</p>"
    lines, by_step = [], False
    for _index, element, job_id in jobs:
        mine = [(step, ts, value) for _a, series, step, ts, value in points.get(job_id, []) if series == name]
        by_step = by_step or any(step is not None for step, _ts, _v in mine)
        start = min((ts for _s, ts, _v in mine if ts), default=0.0)
        line = sorted((step if step is not None else (ts or start) - start, value) for step, ts, value in mine)
        if line:
            lines.append((element, line))
    return (f'<figure class="metric overlay" data-series="{esc(name)}"><figcaption>{esc(name)} of each element'
            "</figcaption>" + svg.overlay(f"{report['sweep']['name']}: {name} by element", lines,
                                          x_label="step" if by_step else "seconds", y_label=name, series=name)
            + "</figure>" + note)


def _drawn(report: dict[str, Any]) -> tuple[list[tuple[int, str, str]], str]:
    """The elements whose curves are drawn, in index order, and a note saying which when not
    all: the ``MAX_CURVES`` highest mean scores (what the best line ranks), then unscored
    elements by index. The first 40 of a 1,000-element sweep said nothing about its best."""
    with_jobs = [e for e in report["elements"] if e["job_id"]]
    if len(with_jobs) <= MAX_CURVES:
        chosen, note = with_jobs, ""
    else:
        scored = sorted((e for e in with_jobs if e.get("score")), key=lambda e: e["score"]["mean"], reverse=True)
        unscored = [e for e in with_jobs if not e.get("score")]
        chosen = (scored + unscored)[:MAX_CURVES]
        which = (f"the {MAX_CURVES} best-scoring" if len(scored) >= MAX_CURVES
                 else f"the {len(scored)} scored and the first unscored" if scored else f"the first {MAX_CURVES}")
        note = (f"<p>Curves of {which} of {len(with_jobs)} elements ({len(with_jobs) - MAX_CURVES} more in the "
                "table).</p>")
    return [(e["index"], e["name"], e["job_id"]) for e in sorted(chosen, key=lambda e: e["index"])], note


def index_page(summaries: list[dict[str, Any]], *, head: Callable[[str], str], foot: str) -> str:
    """``sweeps.html``: one row per sweep (name, elements, done, best)."""
    parts = [head("runjob: sweeps"), f"<h1>Sweeps ({len(summaries)})</h1>"]
    parts.append('<table id="sweeps" class="sortable"><thead><tr><th>sweep</th><th data-type="num">elements</th>'
                 '<th data-type="num">done</th><th>varying</th><th>best</th><th data-type="num">GPU-hours</th>'
                 "</tr></thead><tbody>")
    for s in summaries:
        parts.append(f'<tr data-sweep="{esc(s["id"])}"><td><a href="{sweep_page_name(s["id"])}">{esc(s["name"])}</a>'
                     f'<br><small>{esc(s["id"])}</small></td><td data-sort="{s["elements"]}">{s["elements"]}</td>'
                     f'<td data-sort="{s["done"]}">{s["done"]}</td><td>{esc(", ".join(s["varying"]))}</td>'
                     f'<td>{esc(s["best"] or "-")}</td><td data-sort="{s["gpu_hours"]}">{s["gpu_hours"]:.2f}</td></tr>')
    if not summaries:
        parts.append('<tr><td colspan="6">no sweep recorded yet (a job spec with a sweep: key)</td></tr>')
    parts.append("</tbody></table>" + foot)
    return "".join(parts)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    s, top = report["sweep"], report["best"]
    best = f"{top['name']} ({top['mean']:.3f})" if top else None
    return {"id": s["id"], "name": s["name"], "elements": s["elements"], "done": s["done"], "varying": s["varying"],
            "best": best, "gpu_hours": s["gpu_hours"]}


CACHE = ".sweeps.json"


def write_all(store, out, jobs: list, stamps: dict[str, Any], *, clusters: dict, header: dict,
              write: Callable[[Any, bytes], None], head: Callable[[str], str], foot: str,
              main_series: Callable[[list[tuple]], str | None], page_name: Callable[[str], str]) -> int:
    """Write ``sweeps.html`` and the page of every sweep whose elements changed since the last
    build: a sweep is rebuilt when its state, its elements' jobs or one of their *stamps*
    (the dashboard's per-job stamps; None for a running or just rebuilt job) changed, or its
    page is missing. Returns how many sweep pages were built."""
    from runjob_core.sweep import _report

    rows = store.list_sweeps()
    try:
        cached = json.loads((out / CACHE).read_text(encoding="utf-8"))
        cached = cached["sweeps"] if isinstance(cached, dict) and cached.get("header") == header else {}
    except (OSError, ValueError, KeyError):
        cached = {}  # first build, or a damaged cache: it is only a cache
    members: dict[str, list] = {}
    for job in jobs:
        if job.sweep_id is not None:
            members.setdefault(job.sweep_id, []).append(job.id)
    kept, built = {}, 0
    for row in rows:
        ids = members.get(row.id, [])
        stamp = None if any(stamps.get(i) is None for i in ids) else [row.state, [[i, stamps[i]] for i in ids]]
        entry = cached.get(row.id)
        if stamp is None or not entry or entry.get("stamp") != stamp or not (out / sweep_page_name(row.id)).exists():
            report = _report.build(store, row, clusters=clusters)
            write(out / sweep_page_name(row.id), sweep_page(store, row, report, head=head, foot=foot,
                                                            main_series=main_series, page_name=page_name).encode())
            entry = {"summary": summary(report)}
            built += 1
        kept[row.id] = {"stamp": stamp, "summary": entry["summary"]}
    write(out / "sweeps.html", index_page([kept[r.id]["summary"] for r in rows], head=head, foot=foot).encode())
    write(out / CACHE, json.dumps({"header": header, "sweeps": kept}, default=str).encode())
    return built
