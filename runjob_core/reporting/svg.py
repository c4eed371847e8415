"""Inline SVG plots for the dashboard: no library, no network, readable opened as a file.

Every text that reaches the SVG goes through :func:`esc`. Points carry ``data-*``
attributes (series, attempt, step) so a test or a user's script can read the plot back.
"""

from __future__ import annotations

import html
import math
import re

#: One colour per attempt (1-based, cycling): a resumed attempt continues the curve in its own colour.
COLOURS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f")
#: Above this many points in one chart, points are drawn as lines only (the page stays light).
MAX_MARKERS = 1500
W, H = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 20, 34


#: A character html.escape(quote=True) changes: most texts of a page (numbers, ids, states) have none.
_SPECIAL = re.compile("[&<>\"']").search


def esc(value: object) -> str:
    """``html.escape(str(value), quote=True)``; a text with nothing to escape is returned as it is
    (one regex search instead of five replacements: a dashboard escapes ~170,000 texts)."""
    text = value if type(value) is str else str(value)
    return html.escape(text, quote=True) if _SPECIAL(text) else text


def fmt(value: float) -> str:
    """A number for an axis or an attribute: integers as they are, else 4 significant digits."""
    if value == int(value) and abs(value) < 1e9:
        return str(int(value))
    return "%.4g" % value


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) inside lo..hi, both ends included."""
    if hi == lo:
        return [lo]
    raw = (hi - lo) / (n - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    ticks = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
    return [t for t in ticks if lo - 1e-12 <= t <= hi + 1e-12] or [lo, hi]


def _frame(x_lo: float, x_hi: float, y_lo: float, y_hi: float, x_label: str, y_label: str) -> list[str]:
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot-bg"/>']
    for value in _ticks(y_lo, y_hi):
        y = TOP + plot_h - (0 if y_hi == y_lo else (value - y_lo) / (y_hi - y_lo) * plot_h)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{esc(fmt(value))}</text>')
    for value in _ticks(x_lo, x_hi):
        x = LEFT + (0 if x_hi == x_lo else (value - x_lo) / (x_hi - x_lo) * plot_w)
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">{esc(fmt(value))}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{H - 4}" class="axis" text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text x="12" y="{TOP + plot_h / 2:.1f}" class="axis" text-anchor="middle" '
               f'transform="rotate(-90 12 {TOP + plot_h / 2:.1f})">{esc(y_label)}</text>')
    return out


def _svg(title: str, body: list[str], css_class: str, data: str = "") -> str:
    return (f'<svg class="{css_class}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg"{data}><title>{esc(title)}</title>' + "".join(body) + "</svg>")


def _axes(points: list[tuple[float, float]], x_label: str, y_label: str):
    """The plot area over *points*: (x_lo, y_lo, x scale, y scale, plot width, plot height, the
    frame's elements). One x value: scale 0, every point at the middle; one y value: +-1."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    if y_lo == y_hi:
        y_lo, y_hi = y_lo - 1, y_hi + 1
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    sx = plot_w / (x_hi - x_lo) if x_hi > x_lo else 0.0
    sy = plot_h / (y_hi - y_lo)
    return x_lo, y_lo, sx, sy, plot_w, plot_h, _frame(x_lo, x_hi, y_lo, y_hi, x_label, y_label)


def line_chart(title: str, lines: dict[int, list[tuple[float, float]]], *, x_label: str, y_label: str,
               series: str = "") -> str:
    """One line per attempt (key), points (x, y); a resume continues on the same axes."""
    points = [p for pts in lines.values() for p in pts]
    if not points:
        return ""
    x_lo, y_lo, sx, sy, plot_w, plot_h, body = _axes(points, x_label, y_label)
    markers = len(points) <= MAX_MARKERS
    for attempt, pts in sorted(lines.items()):
        colour = COLOURS[(attempt - 1) % len(COLOURS)]
        # Coordinates rounded once, as text: the same strings serve the line and its points.
        cxs = [f"{LEFT + (x - x_lo) * sx:.1f}" for x, _y in pts] if sx else [f"{LEFT + plot_w / 2:.1f}"] * len(pts)
        cys = [f"{TOP + plot_h - (y - y_lo) * sy:.1f}" for _x, y in pts]
        body.append(f'<polyline class="curve" data-attempt="{attempt}" fill="none" stroke="{colour}" stroke-width="1.6" '
                    'points="' + " ".join([f"{cx},{cy}" for cx, cy in zip(cxs, cys)]) + '"/>')
        if markers:  # numbers only below: fmt() output needs no escaping
            head = f'<circle class="pt" r="2.6" data-attempt="{attempt}" cx="'
            steps = [str(int(x)) if x == int(x) else fmt(x) for x, _y in pts]
            body.append(f'<g class="pts" fill="{colour}"><title>attempt {attempt}</title>'
                        + "".join([f'{head}{cx}" cy="{cy}" data-step="{step}"/>' for cx, cy, step in zip(cxs, cys, steps)])
                        + "</g>")
    legend = [f'<text x="{W - RIGHT - 70 * i}" y="{TOP - 4}" class="legend" text-anchor="end" '
              f'fill="{COLOURS[(a - 1) % len(COLOURS)]}">attempt {a}</text>' for i, a in enumerate(sorted(lines, reverse=True))]
    return _svg(title, body + legend, "chart line-chart", f' data-series="{esc(series)}"')


def histogram(title: str, hist: dict | None, *, x_label: str, series: str = "") -> str:
    """Bars of a histogram ``{"edges": [...], "counts": [...]}`` (see results.histogram)."""
    if not hist or not hist.get("counts"):
        return ""
    edges, counts = hist["edges"], hist["counts"]
    top = max(counts)
    body = _frame(edges[0], edges[-1], 0, top, x_label, "rows")
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    bar_w = plot_w / len(counts)
    for i, count in enumerate(counts):
        h = count / top * plot_h
        body.append(f'<rect class="bar" x="{LEFT + i * bar_w + 1:.1f}" y="{TOP + plot_h - h:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                    f'height="{h:.1f}" data-count="{count}"><title>{esc(fmt(edges[i]))}..{esc(fmt(edges[i + 1]))}: '
                    f'{count} rows</title></rect>')
    return _svg(title, body, "chart histogram", f' data-series="{esc(series)}"')


def bars(title: str, items: list[tuple[str, float]], *, y_label: str) -> str:
    """Labelled bars (the cluster page: GPU-hours per cluster and week)."""
    if not items:
        return ""
    top = max(v for _, v in items) or 1.0
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    body = _frame(0, len(items), 0, top, "", y_label)[:-2]  # no x ticks label row for categories
    bar_w = plot_w / len(items)
    for i, (label, value) in enumerate(items):
        h = value / top * plot_h
        x = LEFT + i * bar_w
        body.append(f'<rect class="bar" x="{x + 2:.1f}" y="{TOP + plot_h - h:.1f}" width="{max(bar_w - 4, 1):.1f}" '
                    f'height="{h:.1f}"><title>{esc(label)}: {esc(fmt(value))}</title></rect>')
        if len(items) <= 16:
            body.append(f'<text x="{x + bar_w / 2:.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">'
                        f'{esc(label[:18])}</text>')
    return _svg(title, body, "chart bars")


def timeline(title: str, spans: list[tuple[int, float, float, str]], marks: list[tuple[float, str, str]]) -> str:
    """Attempts as bars on a time axis (attempt, start, end, state) and events as ticks (ts, kind, text)."""
    times = [t for _, s, e, _ in spans for t in (s, e)] + [t for t, _, _ in marks]
    if not times:
        return ""
    lo, hi = min(times), max(times)
    hi = hi if hi > lo else lo + 1
    plot_w = W - LEFT - RIGHT
    rows = max(1, len(spans))
    height = TOP + 26 * rows + 40
    scale = plot_w / (hi - lo)
    body = []
    for i, (attempt, start, end, state) in enumerate(spans):
        y = TOP + 26 * i
        colour = COLOURS[(attempt - 1) % len(COLOURS)]
        body.append(f'<text x="{LEFT - 6}" y="{y + 15}" class="tick" text-anchor="end">attempt {attempt}</text>'
                    f'<rect class="span" data-attempt="{attempt}" x="{LEFT + (start - lo) * scale:.1f}" y="{y + 4}" '
                    f'width="{max((end - start) * scale, 2):.1f}" height="16" fill="{colour}"><title>attempt {attempt}: '
                    f'{esc(state)}</title></rect>')
    base = TOP + 26 * rows + 6
    for ts, kind, text in marks:
        x = LEFT + (ts - lo) * scale
        body.append(f'<line class="mark mark-{esc(kind)}" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{base + 8}">'
                    f'<title>{esc(kind)}: {esc(text)}</title></line>')
    body.append(f'<text x="{LEFT}" y="{base + 26}" class="tick">0 s</text>'
                f'<text x="{W - RIGHT}" y="{base + 26}" class="tick" text-anchor="end">+{esc(fmt(hi - lo))} s</text>')
    return (f'<svg class="chart timeline" viewBox="0 0 {W} {height}" width="{W}" height="{height}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title>' + "".join(body) + "</svg>")


def sparkline(title: str, points: list[tuple[float, float]], *, width: int = 90, height: int = 22) -> str:
    """A tiny line for the jobs table (at most 60 points, evenly picked): how a run went, at a glance."""
    if len(points) < 2:
        return ""
    if len(points) > 60:
        points = [points[round(i * (len(points) - 1) / 59)] for i in range(60)]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    sx = (width - 2) / (x_hi - x_lo) if x_hi > x_lo else 0.0
    sy = (height - 2) / (y_hi - y_lo) if y_hi > y_lo else 0.0
    coords = " ".join(f"{1 + (x - x_lo) * sx:.1f},{height - 1 - (y - y_lo) * sy:.1f}" for x, y in points)
    return (f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{esc(title)}</title><polyline fill="none" stroke="#2563eb" '
            f'stroke-width="1.2" points="{coords}"/></svg>')


def overlay(title: str, lines: list[tuple[str, list[tuple[float, float]]]], *, x_label: str, y_label: str,
            series: str = "") -> str:
    """Several labelled lines on one pair of axes (a sweep's elements, one line each), each
    line's label in its ``<title>`` and a legend of at most 12 labels."""
    points = [p for _label, pts in lines for p in pts]
    if not points:
        return ""
    x_lo, y_lo, sx, sy, plot_w, plot_h, body = _axes(points, x_label, y_label)
    for number, (label, pts) in enumerate(lines):
        colour = COLOURS[number % len(COLOURS)]
        coords = " ".join(f"{LEFT + (x - x_lo) * sx if sx else LEFT + plot_w / 2:.1f},{TOP + plot_h - (y - y_lo) * sy:.1f}"
                          for x, y in pts)
        body.append(f'<polyline class="curve" data-line="{esc(label)}" data-points="{len(pts)}" fill="none" '
                    f'stroke="{colour}" stroke-width="1.6" points="{coords}"><title>{esc(label)}</title></polyline>')
    legend = [f'<text x="{W - RIGHT}" y="{TOP + 12 + 12 * i}" class="legend" text-anchor="end" '
              f'fill="{COLOURS[i % len(COLOURS)]}">{esc(label[:40])}</text>' for i, (label, _pts) in enumerate(lines[:12])]
    return _svg(title, body + legend, "chart overlay", f' data-series="{esc(series)}"')
