"""runjob's health checks (not a backend: it implements no ``runjob_submit``).

Log checkers are streaming (:mod:`runjob_health._scan`): each submission keeps one
scanner in the context's scratchpad and feeds it only the new log text of each cycle.
"""

from __future__ import annotations

from runjob_core import hookimpl

SOURCE = "runjob-health"


@hookimpl
def runjob_check_health(job, submission, status, window, progress, context):
    from runjob_health import _monitor

    return _monitor.check(job, submission, status, window, progress, context)
