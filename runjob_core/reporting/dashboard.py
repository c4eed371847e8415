"""The dashboard: a static site built from the state store (``.runjob/dashboard/``).

``index.html`` lists every job (sortable), ``job-<id>.html`` shows one job (timeline,
metric curves across attempts, throughput, histograms, the report, the rendered script),
``clusters.html`` the GPU-hours by cluster and week. Plots are inline SVG; the only script
is ``dashboard.js`` (table sorting and filtering) shipped in the package, so the pages work
opened as files, with no server and no network. Every value from the store (job names,
log text, params, samples) is HTML-escaped; links are kept only for http(s) URLs.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any

from runjob_core.reporting import _dashcache, render, svg, sweeps
from runjob_core.reporting.report import build_report, hms

ASSETS = ("dashboard.js", "dashboard.css")
CACHE_FILE = ".results-cache.json"
#: Metric series drawn as throughput rather than as a curve of their own value.
THROUGHPUT_SERIES = ("tokens_per_s", "tokens/s", "samples_per_s", "throughput", "train_samples_per_second",
                     "perf/throughput")


def esc(value: Any) -> str:
    return "" if value is None else svg.esc(value)


def safe_url(url: str | None) -> str | None:
    return url if isinstance(url, str) and re.match(r"^https?://[^\s\"'<>]+$", url) else None


def page_name(job_id: str) -> str:
    return "job-" + re.sub(r"[^A-Za-z0-9._-]", "_", job_id) + ".html"


def default_dir() -> Path:
    from runjob_core.store import state_dir

    return state_dir() / "dashboard"


class Builder:
    """Builds the site; keep one across rebuilds (``--serve``) to reuse parsed results."""

    def __init__(self, store, out: Path, *, clusters: dict | None = None, refresh: int | None = None) -> None:
        self.store, self.out, self.clusters, self.refresh = store, Path(out), clusters or {}, refresh
        # Results summaries survive the process (collect rebuilds the whole site each time and
        # must not re-read every job's results): .results-cache.json, entries of this build only.
        self.cache: dict = _UsedCache(_load_cache(self.out / CACHE_FILE))
        self._written: dict[Path, int] = {}  # page -> hash of the bytes this builder last wrote there

    def build(self) -> dict[str, Any]:
        """Every page whose job changed since the last build (:mod:`._dashcache`), the index and
        the clusters page."""
        self.out.mkdir(parents=True, exist_ok=True)
        with _dashcache.locked(self.out):
            return self._build()

    def _build(self) -> dict[str, Any]:
        start = time.perf_counter()
        for name in ASSETS:
            data = resources.files("runjob_core").joinpath("data", "dashboard", name).read_bytes()
            self._write(self.out / name, data)
        now = time.time()
        jobs = self.store.list_jobs(limit=10**9)
        # Only the jobs that changed since the last build are built again (_dashcache).
        cached = _dashcache.load(self.out, self.clusters)
        stamps = _dashcache.stamps(self.store)
        active = {a.job_id for a in self.store.active_attempts()}
        summaries, weeks, remembered, rebuilt = [], [], {}, 0
        plan = []
        for row in jobs:
            stamp = _dashcache.stamp_of(row, stamps.get(row.id), row.id in active)
            plan.append((row, stamp, _dashcache.reusable(cached.get(row.id), stamp, self.out / page_name(row.id))))
        # The rows of every job to build, read in four queries (not five per job: a cold build of
        # 1,000 jobs made 7,000 statements).
        todo = [row.id for row, _stamp, entry in plan if entry is None]
        events_of, metrics_of = self.store.events_of(todo), self.store.metrics_of(todo)
        attempts_of, artifacts_of = self.store.attempts_of(todo), self.store.artifacts_of(todo)
        for row, stamp, entry in plan:
            if entry is None:
                events, metrics, attempts = events_of.get(row.id, []), metrics_of.get(row.id, []), attempts_of[row.id]
                report = build_report(self.store, row, clusters=self.clusters, now=now, cache=self.cache, events=events,
                                      metrics=metrics, attempts=attempts, artifacts=artifacts_of[row.id])
                entry = {"summary": _summary(row, report, metrics), "gpu_weeks": self._gpu_weeks(row, now, attempts)}
                self._job_page(row, report, events, metrics)
                rebuilt += 1
            summaries.append(entry["summary"])
            weeks.append((row.cluster, entry["gpu_weeks"]))
            # A running job (no stamp) is remembered too, never reused by a build: sync_job() shows it as last built.
            remembered[row.id] = {**entry, "stamp": stamp, "row": [row.state, row.outcome]}
        # Running jobs: when they will be done, at their own rate (new dicts: a summary may be kept between
        # builds; a job with no active attempt has no ETA and costs no query).
        summaries = [summary | {"eta": _eta(self.store, row, now) if row.id in active else None}
                     for row, summary in zip(jobs, summaries)]
        for summary in summaries:
            remembered[summary["id"]]["eta"] = summary["eta"]
        self._write(self.out / "index.html", self._index(summaries).encode())
        self._write(self.out / "clusters.html", self._clusters(weeks).encode())
        self._sweeps(jobs, {job_id: entry["stamp"] for job_id, entry in remembered.items()})
        kept = {k: self.cache[k] for k in self.cache.used if isinstance(k, str) and k in self.cache}
        self._write(self.out / CACHE_FILE, json.dumps(kept, default=str).encode())
        self._write(self.out / _dashcache.FILE, _dashcache.dump(self.clusters, remembered))
        self.cache = _UsedCache(kept)
        return {"jobs": len(jobs), "rebuilt": rebuilt, "seconds": time.perf_counter() - start,
                "path": str(self.out / "index.html")}

    def sync_job(self, job_id: str) -> dict[str, Any]:
        """After one job's collect: rebuild its page and summary, and those of jobs whose state
        changed or that are new since the last build; the index and clusters pages are written
        from the summaries that build kept (a running job's elapsed time and ETA as of then: a
        full :meth:`build` refreshes them). Its cost follows what changed, not the number of
        jobs or of running jobs. A full build when there is no last build to start from.
        Several processes syncing at once take turns (a lock file), so none drops another's job."""
        start = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        with _dashcache.locked(self.out):
            cached = _dashcache.load(self.out, self.clusters)
            if not cached or not (self.out / "index.html").exists():
                return self._build()
            jobs = self.store.list_jobs(limit=10**9)
            now, rebuilt = time.time(), 0
            for row in jobs:
                entry = cached.get(row.id)
                if row.id == job_id or entry is None or entry.get("row") != [row.state, row.outcome]:
                    events, metrics = self.store.events(row.id), self.store.metrics(row.id)
                    report = build_report(self.store, row, clusters=self.clusters, now=now, cache=self.cache,
                                          events=events, metrics=metrics)
                    self._job_page(row, report, events, metrics)
                    # No stamp: the next full build rebuilds this job once, and keeps it from then on.
                    cached[row.id] = {"stamp": None, "row": [row.state, row.outcome], "summary": _summary(row, report, metrics),
                                      "gpu_weeks": self._gpu_weeks(row, now), "eta": _eta(self.store, row, now)}
                    rebuilt += 1
            known = [cached[row.id] for row in jobs]
            self._write(self.out / "index.html", self._index([e["summary"] | {"eta": e.get("eta")} for e in known]).encode())
            self._write(self.out / "clusters.html", self._clusters([(row.cluster, e["gpu_weeks"]) for row, e in zip(jobs, known)]).encode())
            self._sweeps(jobs, {row.id: e.get("stamp") for row, e in zip(jobs, known)})
            self._write(self.out / CACHE_FILE, json.dumps({k: v for k, v in self.cache.items() if isinstance(k, str)}, default=str).encode())
            self._write(self.out / _dashcache.FILE, _dashcache.dump(self.clusters, {row.id: cached[row.id] for row in jobs}))
        return {"jobs": len(jobs), "rebuilt": rebuilt, "seconds": time.perf_counter() - start,
                "path": str(self.out / "index.html")}

    def build_job(self, job_id: str) -> None:
        """Rewrite one job's page (after the sync event, so its report says so)."""
        row = self.store.get_job(job_id)
        self._job_page(row, build_report(self.store, row, clusters=self.clusters, cache=self.cache))

    def _sweeps(self, jobs: list, stamps: dict[str, Any]) -> int:
        """``sweeps.html`` and the pages of the sweeps whose elements changed (:mod:`.sweeps`)."""
        return sweeps.write_all(self.store, self.out, jobs, stamps, clusters=self.clusters,
                                header=_dashcache.header(self.clusters), write=self._write, head=self._head,
                                foot=self._FOOT, main_series=_main_series, page_name=page_name)

    def _write(self, path: Path, data: bytes) -> None:
        digest = hash(data)
        if self._written.get(path) == digest and path.exists():
            return  # a rebuild (--serve, collect) leaves an unchanged page alone without reading it
        _write(path, data)
        self._written[path] = digest

    # ------------------------------------------------------------------ pages

    def _head(self, title: str, stamp: bool = False) -> str:
        # Only the index says when it was built: an unchanged job page stays byte-identical
        # and is not rewritten (file operations are most of a rebuild's cost).
        built = f'<span class="built">built {esc(time.strftime("%Y-%m-%d %H:%M:%S"))}</span>' if stamp else ""
        refresh = f'<meta http-equiv="refresh" content="{int(self.refresh)}">' if self.refresh else ""
        return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>{refresh}'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                '<link rel="stylesheet" href="dashboard.css"></head><body>'
                f'<nav><a href="index.html">Jobs</a> <a href="clusters.html">Clusters</a> <a href="sweeps.html">Sweeps</a>{built}</nav><main>')

    _FOOT = '</main><script src="dashboard.js"></script></body></html>'

    def _index(self, summaries: list[dict[str, Any]]) -> str:
        counts: dict[str, int] = defaultdict(int)
        for s in summaries:
            counts[s["state"]] += 1
        parts = [self._head("runjob: jobs", stamp=True), f"<h1>Jobs ({len(summaries)})</h1>", '<p class="counts">']
        parts += [f'<span class="state state-{esc(k)}">{esc(k)}: {v}</span> ' for k, v in sorted(counts.items())]
        parts.append('</p><input id="filter" type="search" placeholder="filter jobs" aria-label="filter jobs">')
        columns = ("job", "who", "cluster", "state", "attempts", "elapsed", "GPU-hours", "cost", "rows", "score", "curve",
                   "last finding", "Hub")
        parts.append('<table id="jobs" class="sortable"><thead><tr>')
        parts += [f'<th data-type="{"num" if c in ("attempts", "elapsed", "GPU-hours", "cost", "rows", "score") else "text"}">'
                  f"{esc(c)}</th>" for c in columns]
        parts.append("</tr></thead><tbody>")
        for s in summaries:
            parts.append(_index_row(s))
        parts.append("</tbody></table>" + self._FOOT)
        return "".join(parts)

    def _job_page(self, row, report: dict[str, Any], events: list | None = None, metrics: list | None = None) -> None:
        events = self.store.events(row.id) if events is None else events
        metrics = self.store.metrics(row.id) if metrics is None else metrics
        by = f' <small class="who">submitted by {esc(row.who)}</small>' if row.who else ""
        parts = [self._head(f"runjob: {row.name}"), f"<h1>{esc(row.name)} <small>{esc(row.id)}</small>{by}</h1>",
                 f'<p class="headline">{esc(render.headline(report))}</p>']
        closing = report["closing"]
        parts.append(f'<p class="closing {"ok" if closing["complete"] else "missing"}">{esc(closing["line"])}</p>')
        if "go_no_go" in report:
            go = report["go_no_go"]["go"]
            parts.append(f'<p class="verdict {"go" if go else "nogo"}">Canary verdict: {"GO" if go else "NO-GO"}</p>')
        parts.append('<h2>Timeline</h2><section id="timeline">')
        spans = [(a["n"], a["started_at"] or a["submitted_at"] or row.created_at,
                  a["ended_at"] or time.time(), a["state"]) for a in report["attempts"] if a["submitted_at"] or a["started_at"]]
        marks = [(e.ts, e.kind, e.message) for e in events]
        parts.append(svg.timeline(f"{row.name}: attempts and events", spans, marks[-400:]))
        parts.append('<table class="events"><thead><tr><th>time</th><th>attempt</th><th>event</th><th>message</th>'
                     "</tr></thead><tbody>")
        for e in events[-400:]:
            parts.append(f'<tr class="event event-{esc(e.kind)}"><td>{esc(_time(e.ts))}</td><td>{esc(e.attempt)}</td>'
                         f"<td>{esc(e.kind)}</td><td>{esc(e.message)}</td></tr>")
        if len(events) > 400:
            parts.append(f'<tr><td colspan="4">{len(events) - 400} earlier events: runjob events {esc(row.id)}</td></tr>')
        parts.append("</tbody></table></section>")
        parts.append(_plots(row, report, metrics))
        parts.append('<h2>Report</h2><section id="report">' + _report_html(report) + "</section>")
        parts.append('<h2>Script</h2><details id="script"><summary>rendered job script</summary><pre>'
                     f'{esc(row.script or "(not rendered yet)")}</pre></details>')
        parts.append(self._FOOT)
        self._write(self.out / page_name(row.id), "".join(parts).encode())

    def _gpu_weeks(self, row, now: float, attempts: list | None = None) -> list[list]:
        """[week, GPU-hours] of each attempt of the job that ran (kept with its summary)."""
        spec_gpus = _gpus(row)
        attempts = self.store.attempts(row.id) if attempts is None else attempts
        return [[time.strftime("%G-W%V", time.gmtime(a.started_at)), spec_gpus * ((a.ended_at or now) - a.started_at) / 3600]
                for a in attempts if a.started_at and spec_gpus]

    def _clusters(self, weeks: list[tuple[str, list[list]]]) -> str:
        hours: dict[tuple[str, str], float] = defaultdict(float)
        for cluster, job_weeks in weeks:
            for week, value in job_weeks:
                hours[(cluster, week)] += value
        parts = [self._head("runjob: clusters"), "<h1>GPU-hours by cluster and week</h1>"]
        by_cluster: dict[str, float] = defaultdict(float)
        for (cluster, _week), value in hours.items():
            by_cluster[cluster] += value
        parts.append(svg.bars("GPU-hours by cluster", sorted(by_cluster.items()), y_label="GPU-hours"))
        parts.append('<table id="clusters" class="sortable"><thead><tr><th>cluster</th><th>week</th>'
                     '<th data-type="num">GPU-hours</th></tr></thead><tbody>')
        for (cluster, week), value in sorted(hours.items()):
            parts.append(f'<tr><td>{esc(cluster)}</td><td>{esc(week)}</td><td data-sort="{value:.6f}">{value:.2f}</td></tr>')
        if not hours:
            parts.append('<tr><td colspan="3">no GPU time recorded yet (jobs without resources.gpus count none)</td></tr>')
        parts.append("</tbody></table>" + self._FOOT)
        return "".join(parts)


class _UsedCache(dict):
    """A dict that remembers which keys a build looked up or stored."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.used: set = set()

    def __contains__(self, key) -> bool:
        self.used.add(key)
        return super().__contains__(key)

    def __setitem__(self, key, value) -> None:
        self.used.add(key)
        super().__setitem__(key, value)


def _load_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:  # cut by a full disk, say: it is only a cache
        return {}
    return data if isinstance(data, dict) else {}


def build(store, out: Path | None = None, *, clusters: dict | None = None) -> dict[str, Any]:
    return Builder(store, out or default_dir(), clusters=clusters).build()


# ---------------------------------------------------------------------- pieces


def _gpus(row) -> int:
    try:
        spec = json.loads(row.spec_json).get("resources") or {}
        return int(spec.get("gpus") or 0) * max(1, int(spec.get("nodes") or 1))
    except (ValueError, TypeError, AttributeError):
        return 0


def _time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _main_series(metrics: list[tuple]) -> str | None:
    """The curve that says most about a run: a loss, else a reward, else an accuracy, else any."""
    names = sorted({m[1] for m in metrics if m[1] != "rows_done" and m[1] not in THROUGHPUT_SERIES})
    for word in ("loss", "reward", "acc"):
        found = [n for n in names if word in n]
        if found:
            return min(found, key=len)
    return names[0] if names else None


def _summary(row, report: dict[str, Any], metrics: list[tuple]) -> dict[str, Any]:
    attempts = report["attempts"]
    first = min((a["submitted_at"] or a["started_at"] for a in attempts if a["submitted_at"] or a["started_at"]), default=None)
    last = max((a["ended_at"] for a in attempts if a["ended_at"]), default=None)
    active = any(a["ended_at"] is None for a in attempts)
    elapsed = ((time.time() if active or last is None else last) - first) if first else None
    findings = [a for a in report["anomalies"] if a["kind"] in ("health", "validation", "lifecycle", "results", "scores")]
    hub = next((a for a in reversed(report["artifacts"]) if a["kind"] == "hub"), None)
    score = (report["results"].get("score") or {}).get("mean")
    rows = report["results"].get("rows") or (attempts[-1]["rows_done"] if attempts else None)
    return {"id": row.id, "name": row.name, "who": row.who, "kind": row.kind, "cluster": row.cluster,
            "state": report["job"]["state"],
            "outcome": row.outcome, "attempts": len(attempts), "elapsed": elapsed,
            "gpu_hours": report["resources"]["gpu_hours"], "cost": report["resources"]["cost"], "rows": rows,
            "score": score, "last_finding": findings[-1]["message"] if findings else None,
            "hub": hub["location"] if hub else None, "hub_name": hub["name"] if hub else None,
            "go": report.get("go_no_go", {}).get("go"), "curve": _curve(row, metrics)}


def _eta(store, row, now: float) -> dict[str, Any] | None:
    """A running job's ETA at the rate it really achieves (runjob_core.estimator.eta)."""
    if row.outcome or not store.active_attempts([row.id]):  # a finished job: no query
        return None
    from runjob_core.estimator.eta import eta_for

    return eta_for(store, row, now)


def _eta_html(eta: dict[str, Any] | None) -> str:
    if not eta:
        return ""
    warn = f' class="eta-warning" title="{esc(eta["warning"])}"' if eta["warning"] else ""
    return f'<br><small{warn}>ETA {esc(hms(eta["remaining_seconds"]))} left{" (over the time limit)" if warn else ""}</small>'


def _curve(row, metrics: list[tuple]) -> tuple[str, str] | None:
    name = _main_series(metrics)
    if name is None:
        return None
    start = row.created_at
    points = sorted(((step if step is not None else (ts or start) - start), value)
                    for _a, series, step, ts, value in metrics if series == name)
    return name, svg.sparkline(f"{row.name}: {name}", points)


def _num_cell(value: float | None, text: str | None = None, extra: str = "") -> str:
    """A sortable number cell; *extra* is HTML already escaped (the ETA under the elapsed time)."""
    if value is None:
        return f'<td data-sort="">-{extra}</td>'
    return f'<td data-sort="{value}">{esc(text if text is not None else value)}{extra}</td>'


def _index_row(s: dict[str, Any]) -> str:
    badge = ""
    if s["kind"] == "canary":
        verdict = "GO" if s["go"] else "NO-GO"
        badge = f' <span class="badge {"go" if s["go"] else "nogo"}">canary {verdict}</span>'
    hub = safe_url(s["hub"])
    hub_cell = f'<a href="{esc(hub)}" rel="noopener noreferrer">{esc(s["hub_name"])}</a>' if hub else esc(s["hub_name"] or "-")
    return (f'<tr data-job="{esc(s["id"])}"><td data-sort="{esc(s["name"])}"><a href="{page_name(s["id"])}">'
            f'{esc(s["name"])}</a>{badge}<br><small>{esc(s["id"])}</small></td>{_who_cell(s.get("who"))}'
            f'<td>{esc(s["cluster"])}</td>'
            f'<td class="state state-{esc(s["state"])}" title="{esc(s["outcome"] or "")}">{esc(s["state"])}</td>'
            + _num_cell(s["attempts"])
            + _num_cell(s["elapsed"], hms(s["elapsed"]) if s["elapsed"] is not None else None, extra=_eta_html(s.get("eta")))
            + _num_cell(s["gpu_hours"], f'{s["gpu_hours"]:.2f}')
            + _num_cell(s["cost"], f'{s["cost"]:.2f}' if s["cost"] is not None else None)
            + _num_cell(s["rows"]) + _num_cell(s["score"], f'{s["score"]:.4g}' if s["score"] is not None else None)
            + (f'<td class="curve" data-sort="{esc(s["curve"][0])}">{s["curve"][1]}<br><small>{esc(s["curve"][0])}</small></td>'
               if s["curve"] else '<td class="curve" data-sort="">-</td>')
            + f'<td class="finding">{esc(s["last_finding"] or "-")}</td><td>{hub_cell}</td></tr>')


def _who_cell(who: str | None) -> str:
    """Who submitted the job (a shared state shows every member's): the user, with user@host on
    hover; "-" for a job from before runjob recorded it (state schema 5)."""
    if not who:
        return '<td class="who" data-sort="">-</td>'
    user = who.rpartition("@")[0] or who
    return f'<td class="who" data-sort="{esc(who)}" title="{esc(who)}">{esc(user)}</td>'


def _plots(row, report: dict[str, Any], metrics: list[tuple]) -> str:
    by_series: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    start = row.created_at
    for attempt, series, step, ts, value in metrics:
        if series == "rows_done":
            continue
        x = step if step is not None else ((ts or start) - start)
        by_series[series][attempt].append((x, value))
    parts = ['<h2>Metrics</h2><section id="metrics">']
    curves = [name for name in by_series if name not in THROUGHPUT_SERIES]
    curves.sort(key=lambda n: (0 if "loss" in n else 1 if "reward" in n else 2 if "acc" in n else 3, n))
    for name in curves:
        x_label = "step" if any(step is not None for _a, s, step, _t, _v in metrics if s == name) else "seconds"
        parts.append(f'<figure class="metric" data-series="{esc(name)}"><figcaption>{esc(name)}</figcaption>'
                     + svg.line_chart(f"{row.name}: {name}", by_series[name], x_label=x_label, y_label=name, series=name)
                     + "</figure>")
    throughput = _throughput(metrics, start)
    for name in THROUGHPUT_SERIES:
        if name in by_series:
            throughput.setdefault(name, by_series[name])
    for name, lines in throughput.items():
        parts.append(f'<figure class="metric throughput" data-series="{esc(name)}"><figcaption>throughput: {esc(name)}'
                     "</figcaption>" + svg.line_chart(f"{row.name}: {name}", lines, x_label="seconds since created"
                                                      if name == "rows/s" else "step", y_label=name, series=name)
                     + "</figure>")
    results = report["results"]
    score = results.get("score") or {}
    if score.get("histogram"):
        parts.append('<figure class="hist" data-series="score"><figcaption>score histogram</figcaption>'
                     + svg.histogram(f"{row.name}: scores", score["histogram"], x_label=results["fields"]["score"] or "score",
                                     series="score") + "</figure>")
    tokens = results.get("tokens") or {}
    if tokens.get("histogram"):
        parts.append('<figure class="hist" data-series="tokens"><figcaption>token-length histogram</figcaption>'
                     + svg.histogram(f"{row.name}: token lengths", tokens["histogram"], x_label=tokens["field"],
                                     series="tokens") + "</figure>")
    if len(parts) == 1:
        parts.append("<p>No metrics recorded: call runjob_core.job.progress(step=..., loss=...) in the job, or log "
                     "HF Trainer / TRL / verl / OpenRLHF lines.</p>")
    parts.append("</section>")
    return "".join(parts)


def _throughput(metrics: list[tuple], start: float) -> dict[str, dict[int, list[tuple[float, float]]]]:
    """rows/s between consecutive rows_done points of each attempt."""
    lines: dict[int, list[tuple[float, float]]] = defaultdict(list)
    previous: dict[int, tuple[float, float]] = {}
    for attempt, series, _step, ts, value in sorted((m for m in metrics if m[1] == "rows_done" and m[3] is not None),
                                                    key=lambda m: (m[0], m[3])):
        if attempt in previous and ts > previous[attempt][0]:
            t0, v0 = previous[attempt]
            lines[attempt].append((ts - start, (value - v0) / (ts - t0)))
        previous[attempt] = (ts, value)
    return {"rows/s": lines} if lines else {}


def _report_html(report: dict[str, Any]) -> str:
    parts = ['<table class="summary"><tbody>']
    parts += [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in render.statistics_rows(report)]
    parts.append("</tbody></table><h3>Attempts</h3><table><thead><tr><th>#</th><th>backend id</th><th>ran</th>"
                 "<th>ended</th><th>step</th><th>rows</th><th>then</th></tr></thead><tbody>")
    for a in report["attempts"]:
        parts.append("<tr>" + "".join(f"<td>{esc(v if v is not None else '-')}</td>" for v in (
            a["n"], a["backend_job_id"], hms(a["run_seconds"]), a["cause"], a["step"], a["rows_done"], a["then"])) + "</tr>")
    parts.append("</tbody></table><h3>Anomalies</h3>")
    if report["anomalies"]:
        parts.append('<table class="anomalies"><thead><tr><th>label</th><th>severity</th><th>count</th><th>message</th>'
                     "<th>source</th></tr></thead><tbody>")
        for a in report["anomalies"]:
            parts.append(f'<tr class="sev-{esc(a["severity"])}">' + "".join(
                f"<td>{esc(a[k])}</td>" for k in ("label", "severity", "count", "message", "source")) + "</tr>")
        parts.append("</tbody></table>")
    else:
        parts.append("<p>None found.</p>")
    if report["samples"]:
        parts.append("<h3>Samples</h3>")
        for sample in report["samples"]:
            text = json.dumps(sample["row"], ensure_ascii=False, indent=2, default=str)
            parts.append(f'<details class="sample"><summary>{esc(sample["why"])} (row {esc(sample["index"])})</summary>'
                         f"<pre>{esc(text)}</pre></details>")
    if report["artifacts"]:
        parts.append("<h3>Artifacts</h3><ul>")
        for a in report["artifacts"]:
            url = safe_url(a["location"])
            where = f'<a href="{esc(url)}" rel="noopener noreferrer">{esc(url)}</a>' if url else esc(a["location"])
            rows = f", {esc(a['rows'])} rows" if a["rows"] is not None else ""
            parts.append(f"<li>{esc(a['kind'])} {esc(a['name'])}: {where}{rows}</li>")
        parts.append("</ul>")
    parts.append("<h3>Next steps</h3><ul>" + "".join(f"<li>{esc(s)}</li>" for s in report["next_steps"]) + "</ul>")
    return "".join(parts)


def _write(path: Path, data: bytes) -> None:
    """Replace *path* atomically (a browser reloading mid-build never reads half a page; two
    runjob processes rebuilding at once each write their own temporary file), and only if
    its bytes changed."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
