"""Sweeps: one job spec expanded into many ordinary jobs (issue 26).

:mod:`._spec` expands the ``sweep:`` key, :mod:`._load` validates a sweep file,
:mod:`._run` carries the elements (pre-flight per resource shape, at most ``max_parallel``
at once, resume of the unfinished ones) and :mod:`._report` compares their results.
"""

from runjob_core.sweep._load import Sweep, is_sweep_file, load_sweep, sweep_from_mapping
from runjob_core.sweep._spec import SweepElement, expand_sweep

__all__ = ["Sweep", "SweepElement", "expand_sweep", "is_sweep_file", "load_sweep", "sweep_from_mapping"]
