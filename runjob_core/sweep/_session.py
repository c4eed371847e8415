"""The sweep side of the Python API (:meth:`runjob_core.api.Session.sweep`): the CLI's gate
without its prompts, and the loop that follows a set of elements to their end, starting each
when the sweep's ``max_parallel`` leaves it a slot. The records live in :mod:`runjob_core.api`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from runjob_core import lifecycle
from runjob_core.context import RunContext
from runjob_core.errors import RefusedError
from runjob_core.models import ACTIVE_STATES, COMPLETED
from runjob_core.store import SweepRow
from runjob_core.sweep import _budget
from runjob_core.sweep._load import Sweep, load_sweep, sweep_from_mapping


@attrs.frozen
class Opened:
    """A sweep recorded and started: its record, its spec and the elements pre-flight refused
    (index -> problems; skipped, or submitted anyway with *force*)."""

    row: SweepRow
    sweep: Sweep
    refused: dict[int, tuple[str, ...]]
    warnings: dict[int, tuple[str, ...]]
    #: How many elements are active at once (``max_parallel``, or the backend's default).
    limit: int


def load(spec: str | Path | Mapping[str, Any], *, base_dir: str | Path | None, allow_large: bool) -> Sweep:
    if isinstance(spec, Mapping):
        return sweep_from_mapping(dict(spec), source="<python>", base_dir=str(base_dir or "."), allow_large=allow_large)
    return load_sweep(Path(spec), allow_large=allow_large)


def open_sweep(context: RunContext, sweep: Sweep, *, force: bool, skip_refused: bool, spec_path: str | None) -> Opened:
    """Pre-flight once per resource shape; refuse (naming the elements) unless *force* or
    *skip_refused*; record the sweep (the same record on a rerun) and start as many elements
    as ``max_parallel`` allows."""
    from runjob_core.sweep import _run

    checks = _run.preflight(context, sweep)
    refused = _run.refused(checks)
    if refused and not force and not skip_refused:
        names = ", ".join(f"{i} ({sweep.elements[i].name})" for i in sorted(refused))
        first = next(iter(refused.values()))
        raise RefusedError(f"pre-flight refused {len(refused)} of {len(sweep.jobs)} elements of sweep {sweep.name}: "
                           f"{names} ({'; '.join(first)}); pass skip_refused=True to run the others, force=True "
                           "to submit them all")
    skip = set(refused) if not force else set()
    row = _run.record(context, sweep)
    context.store.set_sweep_state(row.id, "active")
    _run.settle(context, row)
    estimates = {i: c.preflight for c in checks for i in c.indices}
    limit = _limit(context, sweep, row)
    _run.start(context, sweep, row, limit=limit, skip=skip, spec_path=spec_path, estimates=estimates,
               budget=_budget.from_checks(sweep, checks))
    warnings = {i: c.preflight.warnings for c in checks for i in c.indices if c.preflight.warnings}
    return Opened(row=context.store.find_sweep(row.id), sweep=sweep, refused=refused, warnings=warnings, limit=limit)


def _limit(context: RunContext, sweep: Sweep, row: SweepRow) -> int:
    from runjob_core.sweep import _run

    return row.max_parallel or _run.parallel_limit(context, sweep)


@attrs.frozen
class Wanted:
    """One element to follow: which sweep, which index, whether pre-flight refused it (never started)."""

    sweep_id: str
    index: int
    refused: bool


def follow(context: RunContext, wanted: list[Wanted], *, deadline: float | None,
           states: Callable[[dict[tuple[str, int], str]], list[Any]],
           on_cycle: Callable[[list[Any]], None] | None = None) -> list[Any]:
    """Start the *wanted* elements as slots free (only those: the sweep's other elements are
    left as they are), follow them with one monitor cycle per round, collect each that
    completes (the combined report reads the collected results), until every wanted element
    has ended or cannot start. *states* turns {(sweep id, index): why it did not start} into
    the caller's records. Raises :class:`WaitTimeoutError` at *deadline* (monotonic)."""
    from runjob_core import monitor
    from runjob_core.errors import WaitTimeoutError
    from runjob_core.sweep import _run

    store = context.store
    by_sweep: dict[str, set[int]] = {}
    for item in wanted:
        by_sweep.setdefault(item.sweep_id, set()).add(item.index)
    refused = {(w.sweep_id, w.index) for w in wanted if w.refused}
    driven = {}
    for sweep_id, indices in by_sweep.items():
        row = store.find_sweep(sweep_id)
        sweep = _run.from_record(row)
        skip = {i for i in range(len(sweep.jobs)) if i not in indices or (sweep_id, i) in refused}
        driven[sweep_id] = (row, sweep, skip, {}, _budget.from_checks(sweep, _run.preflight(context, sweep)))
        _run.settle(context, row)
    interval = 0.5
    while True:
        following = []
        for sweep_id, (row, sweep, skip, not_started, budget) in driven.items():
            active, jobs, cancelled = _run.start(context, sweep, row, limit=_limit(context, sweep, row), skip=skip,
                                                 not_started=not_started, restarted=set(), budget=budget)
            for index in by_sweep[sweep_id]:
                job = jobs.get(index)
                if job is not None and job.state == COMPLETED and _run._collected(store, job) is None:
                    lifecycle.collect(context, store.get_job(job.id))
            following += [jobs[i].id for i in active if i in by_sweep[sweep_id]]
            if not cancelled:
                following += [f"pending:{sweep_id}/{i}" for i in by_sweep[sweep_id]
                              if i not in skip and i not in not_started and i not in active
                              and _run._startable(store, jobs.get(i)) == "submit"]
        why = {(sid, i): reason for sid, (_r, _s, _k, ns, _b) in driven.items() for i, reason in ns.items()}
        result = states(why)
        if on_cycle is not None:
            on_cycle(result)
        if not following:
            return result
        if deadline is not None and time.monotonic() >= deadline:
            waiting = ", ".join(getattr(s, "name", str(s)) for s in result if getattr(s, "state", None) in
                                (*ACTIVE_STATES, "NOT_SUBMITTED"))
            raise WaitTimeoutError(f"sweep elements still running or waiting for a slot: {waiting}")
        running = [job_id for job_id in following if not job_id.startswith("pending:")]
        changed = monitor.cycle(context, running, keep_leases=True).changed if running else False
        interval = 0.5 if changed else min(5.0, interval * 1.5)
        time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
