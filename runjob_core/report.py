"""The results report of a job: kept as a name for callers; the logic is in
:mod:`runjob_core.reporting.report`."""

from runjob_core.reporting.report import build_report

__all__ = ["build_report"]
