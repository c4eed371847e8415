"""runjob's health checks (not a backend: it implements no ``runjob_submit``).

Log checkers are streaming (:mod:`runjob_health._scan`): each submission keeps one
scanner in the context's scratchpad and feeds it only the new log text of each cycle.
The prefilter runs on Hyperscan when it is installed and on ``bytes.find`` otherwise
(``RUNJOB_HEALTH_ENGINE=python`` forces the fallback); the findings are the same.
"""

from __future__ import annotations

from runjob_core import hookimpl

SOURCE = "runjob-health"


@hookimpl
def runjob_check_health(job, submission, status, window, progress, context):
    from runjob_health import _monitor

    return _monitor.check(job, submission, status, window, progress, context)


@hookimpl
def runjob_scan_log(job, path):
    """``runjob health scan``: one memory-mapped pass over the whole file (the same
    findings as feeding it through :func:`runjob_check_health`, much faster)."""
    from runjob_health import _monitor

    return [_monitor._finding(hit) for hit in scan_file(path, max_tokens=job.model.max_tokens)]


def scan_file(path, *, max_tokens: int | None = None, engine: str | None = None) -> list:
    """Run every log checker over one whole file and return its findings.

    Each finding is a frozen record with ``label``, ``line`` (1-based), ``message`` (what
    happened and what to do, one line), ``severity`` ("error" | "warning" | "info"),
    ``action`` ("stop" | "resume" | "retry" | "warn" | "continue") and ``text`` (the log
    line, at most 300 characters).  *max_tokens* enables the output-token-count
    truncation check; *engine* is "hyperscan", "python" or None (``$RUNJOB_HEALTH_ENGINE``,
    else the fastest installed).  Raises ValueError for an unknown or missing engine.
    """
    from runjob_health import _scan

    return _scan.scan_file(path, max_tokens=max_tokens, engine=engine)
