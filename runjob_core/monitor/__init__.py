"""The monitor: poll every active job (batched per cluster), read only new log bytes,
run the health checks, record findings and apply their actions.

One :class:`Monitor` per invocation (``Monitor.of(context)``) owns what lasts between
cycles; ``runjob status`` runs one cycle of it, ``runjob watch``/``run`` and
:meth:`runjob_core.api.Session.wait` run :meth:`Monitor.watch`. Killed and restarted, the
monitor carries on from the log offsets and states in the store. One cycle makes one
``runjob_poll`` call per cluster, whatever the number of jobs.

The wing: :mod:`.monitor` (the Monitor and its cycle), :mod:`.observe` (one attempt),
:mod:`.endings` (stop, resume, retry, release), :mod:`.memo` (what an unchanged job costs),
:mod:`.leases` (one writer per job), :mod:`.push` and :mod:`.hub` (the push path).
"""

from __future__ import annotations

from collections.abc import Callable

from runjob_core.monitor.monitor import Monitor
from runjob_core.monitor.views import CycleResult, JobView

__all__ = ["CycleResult", "JobView", "Monitor", "cycle", "watch"]


def cycle(context, job_ids: list[str] | None = None, *, woken: dict[str, set[str]] | None = None,
          keep_leases: bool = False) -> CycleResult:
    """One pass of the context's :class:`Monitor` (:meth:`Monitor.cycle`)."""
    return Monitor.of(context).cycle(job_ids, woken=woken, keep_leases=keep_leases)


def watch(context, job_ids: list[str], *, once: bool = False, min_interval: float = 0.5, max_interval: float = 30.0,
          on_cycle: Callable[[CycleResult], None] | None = None, until: float | None = None) -> CycleResult:
    """The context's :class:`Monitor` follows *job_ids* until they end (:meth:`Monitor.watch`)."""
    return Monitor.of(context).watch(job_ids, once=once, min_interval=min_interval, max_interval=max_interval,
                                     on_cycle=on_cycle, until=until)
