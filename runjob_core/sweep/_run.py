"""Carrying a sweep's elements: pre-flight once per resource shape, the sweep recorded once,
at most ``max_parallel`` elements active at once, each an ordinary job (own spec hash,
attempts, health checks, resume, collect).

A rerun of the same sweep (after a kill -9, or from a second terminal) finds the sweep by its
name and spec hash and each element's job by its sweep and index: active elements are
followed, completed ones collected if they were not, elements interrupted while submitting
are reattached by their tag; nothing is submitted twice. Starting elements holds the lease
``sweep-start:<id>`` so that two processes driving one sweep never exceed the bound.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable

import attrs

from runjob_core import config, lifecycle
from runjob_core.context import RunContext
from runjob_core.errors import RunjobError
from runjob_core.models import COMPLETED, JobSpec
from runjob_core.store import JobRow, SweepRow, _base36
from runjob_core.sweep._load import Sweep

#: An element no job was submitted for (yet).
NOT_SUBMITTED = "NOT_SUBMITTED"
#: The parts of a spec that decide where and on what an element runs: pre-flight runs once for
#: each distinct combination (its first element stands for the others).
SHAPE_FIELDS = ("cluster", "resources", "model", "template", "benchmark", "data")


def new_sweep_id() -> str:
    return "sw-" + _base36(int(time.time())) + secrets.token_hex(3)


# ---------------------------------------------------------------------------- pre-flight


@attrs.frozen
class ShapeCheck:
    """Pre-flight of one resource shape: the elements it stands for and its verdict."""

    label: str
    indices: tuple[int, ...]
    preflight: lifecycle.Preflight


def shape_key(job: JobSpec) -> str:
    # Only the shape's fields made plain (the whole job was 0.1 ms an element, twice per submit).
    data = {k: getattr(job, k) for k in SHAPE_FIELDS}
    return json.dumps({k: config.unstructure(v) if attrs.has(type(v)) else v for k, v in data.items()},
                      sort_keys=True, default=str)


def shape_keys(jobs: list[JobSpec]) -> list[str]:
    """:func:`shape_key` of each of *jobs*, made once per distinct set of shape objects: a
    sweep's elements share the shape fields no value of theirs changes (``attrs.evolve``
    keeps them), so a 1,000-element grid over a param has one shape to write (was 0.1 s)."""
    made: dict[tuple[int, ...], str] = {}
    keys = []
    for job in jobs:
        identity = tuple(id(getattr(job, k)) for k in SHAPE_FIELDS)  # the objects live in *jobs* meanwhile
        if identity not in made:
            made[identity] = shape_key(job)
        keys.append(made[identity])
    return keys


def _shape_label(job: JobSpec) -> str:
    res = job.resources
    gpus = f"{res.gpus} x {res.gpu_type or 'GPU'}" if res.gpus else "no GPU"
    model = job.model.path or job.model.name
    return f"{job.cluster}: {gpus}" + (f", {model}" if model else "") + (f", {job.benchmark}" if job.benchmark else "")


def preflight(context: RunContext, sweep: Sweep) -> list[ShapeCheck]:
    """Pre-flight once per distinct resource shape (``SHAPE_FIELDS``), on its first element.
    Params are not part of the shape: a swept param that changes what pre-flight estimates
    (a batch size) is judged on the shape's first element only."""
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(shape_keys(sweep.jobs)):
        groups.setdefault(key, []).append(index)
    checks, warmed = [], set()
    for indices in groups.values():
        job = sweep.jobs[indices[0]]
        cluster = lifecycle.cluster_for(context, job)
        if cluster.name not in warmed and not context.backend_info(cluster.type).machine_per_job:
            context.transport(cluster).warm()
            warmed.add(cluster.name)
        checks.append(ShapeCheck(_shape_label(job), tuple(indices), lifecycle.preflight(context, job, cluster)))
    return checks


def refused(checks: list[ShapeCheck]) -> dict[int, tuple[str, ...]]:
    """Element index -> the problems that refuse it."""
    return {i: c.preflight.problems for c in checks if c.preflight.refused for i in c.indices}


# ---------------------------------------------------------------------------- the record


def record(context: RunContext, sweep: Sweep) -> SweepRow:
    """The sweep's record: found by name and spec hash (a rerun, a second process), else made."""
    store = context.store
    with store.claim(f"sweep:{sweep.name}:{sweep.spec_hash}"):
        found = store.find_sweep(sweep.name, spec_hash=sweep.spec_hash)
        if found is not None:
            return found
        sweep_id = new_sweep_id()
        store.create_sweep(sweep_id=sweep_id, name=sweep.name, spec_hash=sweep.spec_hash,
                           spec_json=json.dumps({"source": sweep.source, "base_dir": sweep.base_dir, "spec": sweep.spec},
                                                sort_keys=True, default=str),
                           elements_json=json.dumps(sweep.elements_record(), default=str),
                           max_parallel=sweep.max_parallel or 0)
        context.event(None, "sweep", f"sweep {sweep.name} recorded as {sweep_id}: {len(sweep.jobs)} elements "
                      f"over {', '.join(sweep.varying) or 'one variant'}", sweep=sweep_id)
        return store.find_sweep(sweep_id)


def from_record(row: SweepRow) -> Sweep:
    """The sweep spec a record was made from (``runjob resume SWEEP`` starts its elements)."""
    from runjob_core.sweep._load import sweep_from_mapping

    stored = json.loads(row.spec_json)
    return sweep_from_mapping(stored["spec"], source=stored["source"], base_dir=stored["base_dir"], allow_large=True)


def find(store, ref: str) -> SweepRow | None:
    """A sweep by id or name; None when *ref* is a job's id (a job id wins over a sweep's name)."""
    if ref.startswith("rj-"):
        return None
    return store.find_sweep(ref)


def parallel_limit(context: RunContext, sweep: Sweep) -> int:
    """``max_parallel``, else: on this machine its GPU count (or 1), elsewhere every element at once."""
    if sweep.max_parallel:
        return sweep.max_parallel
    if any(lifecycle.cluster_for(context, job).type == "local" for job in sweep.jobs):
        from runjob_core.gpu import read_gpus

        return max(1, len(read_gpus(context.run) or []))
    return len(sweep.jobs)


# ---------------------------------------------------------------------------- elements


def element_jobs(store, sweep_id: str) -> dict[int, JobRow]:
    """Element index -> its latest job."""
    return {row.sweep_index: row for row in store.sweep_jobs(sweep_id) if row.kind == "full"}


def _collected(store, row: JobRow) -> str | None:
    """'collected' or 'collect_failed' once the final collect ran, else None."""
    events = store.events(row.id, kinds=("collected", "collect_failed"))
    return events[-1].kind if events else None


def elements(store, row: SweepRow) -> list[dict]:
    """One entry per element: index, name, values, job id, state (NOT_SUBMITTED without a
    job), outcome and whether it is done (completed and its results collected)."""
    jobs = store.sweep_job_states(row.id)  # (id, state, outcome): not each job's spec and script
    # Two queries for the whole sweep, not two per element (1,000 elements: ~50 ms).
    attempted = store.jobs_with_attempts([job_id for job_id, _state, _outcome in jobs.values()])
    completed = [job_id for job_id, state, _outcome in jobs.values() if job_id in attempted and state == COMPLETED]
    ends = {job_id: events[-1].kind for job_id, events in
            store.events_of(completed, kinds=("collected", "collect_failed")).items() if events} if completed else {}
    out = []
    for element in row.elements:
        job_id, state, outcome = jobs.get(element["index"], (None, None, None))
        state = state if job_id is not None and job_id in attempted else NOT_SUBMITTED
        collected = ends.get(job_id) if job_id is not None and state == COMPLETED else None
        out.append({"index": element["index"], "name": element["name"], "job": element["job"], "values": element["values"],
                    "job_id": job_id, "state": state, "outcome": outcome, "collected": collected,
                    "done": state == COMPLETED and collected == "collected"})
    return out


def _active(store, jobs: dict[int, JobRow]) -> set[int]:
    """Elements whose job is still running, or ended with its follow-up (a resume) not done yet."""
    by_id = {row.id: index for index, row in jobs.items()}
    busy = {a.job_id for a in store.active_attempts(list(by_id))} | {j for j, _n in store.pending_actions(list(by_id))}
    return {by_id[j] for j in busy if j in by_id}


def _startable(store, job: JobRow | None) -> str | None:
    """How an element not active now starts: 'submit' (no attempt yet), 'resume' (ended, not
    done), None (done)."""
    if job is None or store.latest_attempt(job.id) is None:
        return "submit"
    if job.state == COMPLETED:
        return None
    return "resume"


@attrs.frozen
class Driven:
    """What :func:`drive` left: the element table and the elements that could not start."""

    elements: list[dict]
    not_started: dict[int, str]
    cancelled: bool

    @property
    def failed(self) -> list[dict]:
        return [e for e in self.elements if not e["done"]]


def drive(context: RunContext, sweep: Sweep, row: SweepRow, *, checks: list[ShapeCheck], skip: set[int] = frozenset(),
          spec_path: str | None = None, restart_ended: bool = False, limit: int | None = None, interval: float = 0.5,
          on_cycle: Callable[[list[dict]], None] | None = None) -> Driven:
    """Start elements while fewer than *limit* are active, follow them (one monitor cycle for
    all), collect each that completes, until none is active and none can start.

    *skip*: elements not to start (refused by pre-flight). *restart_ended*: resubmit elements
    that ended without completing (``runjob resume SWEEP``), each once; otherwise they stay as
    they ended. An element whose start fails is reported and not tried again in this call.
    """
    from runjob_core import monitor

    from runjob_core.sweep import _budget

    store = context.store
    limit = limit or parallel_limit(context, sweep)
    if not checks:  # a resume: the estimates (and a budget the elements share) as of now
        checks = preflight(context, sweep)
    estimates = {i: c.preflight for c in checks for i in c.indices}
    budget = _budget.from_checks(sweep, checks)
    not_started: dict[int, str] = {}
    restarted: set[int] = set()
    settle(context, row)
    while True:
        active, jobs, cancelled = start(context, sweep, row, limit=limit, skip=skip, spec_path=spec_path,
                                        estimates=estimates, restart_ended=restart_ended, not_started=not_started,
                                        restarted=restarted, budget=budget)
        for job in jobs.values():
            if job.state == COMPLETED and _collected(store, job) is None:
                lifecycle.collect(context, store.get_job(job.id))
        table = elements(store, row)
        if on_cycle is not None:
            on_cycle(table)
        if not active:
            return Driven(table, not_started, cancelled)
        monitor.cycle(context, [jobs[i].id for i in sorted(active)], keep_leases=True)
        time.sleep(interval)


def settle(context: RunContext, row: SweepRow) -> None:
    """Elements an interrupted runjob left SUBMITTING: reattached by their tag, or submitted
    as that same attempt (same tag) when the backend never got them."""
    from runjob_core import interrupted

    for job in element_jobs(context.store, row.id).values():
        if interrupted.stuck(context, job) is None:
            continue
        try:
            with context.store.claim(f"submit:{job.id}", wait=0):
                if interrupted.stuck(context, job) is not None:  # not settled by another process meanwhile
                    interrupted.finish(context, job)
        except RunjobError as exc:
            if "another runjob process" not in str(exc):
                raise
            # Another runjob process is submitting it right now (an array, say): it records it.


def start(context: RunContext, sweep: Sweep, row: SweepRow, *, limit: int, skip: set[int] = frozenset(),
          spec_path: str | None = None, estimates: dict | None = None, restart_ended: bool = False,
          not_started: dict[int, str] | None = None, restarted: set[int] | None = None, budget=None,
          ) -> tuple[set[int], dict[int, JobRow], bool]:
    """Start elements, in index order, while fewer than *limit* are active: (active elements,
    element jobs, whether the sweep is cancelled). *not_started* collects the elements whose
    start failed (not tried again), *restarted* those resumed (each once). *budget*
    (:mod:`._budget`): an element over its cluster's budget waits while another element there
    is active, and is not started when none is."""
    store = context.store
    not_started = {} if not_started is None else not_started
    restarted = set() if restarted is None else restarted
    with store.claim(f"sweep-start:{row.id}"):
        jobs = element_jobs(store, row.id)
        active = _active(store, jobs)
        cancelled = store.find_sweep(row.id).state == "cancelled"
        if not cancelled:
            in_arrays = _start_arrays(context, sweep, row, jobs, active, skip=skip, limit=limit, spec_path=spec_path,
                                      estimates=estimates, not_started=not_started)
            active |= in_arrays
            if in_arrays or not_started:
                jobs = element_jobs(store, row.id)
        started_here = False
        for index in range(len(sweep.jobs)):
            if cancelled or len(active) >= limit:
                break
            if index in active or index in skip or index in not_started or index in restarted:
                continue
            how = _startable(store, jobs.get(index))
            if how is None or (how == "resume" and not restart_ended):
                continue
            if budget and _over_budget(context, sweep, row, budget, jobs, active, index, not_started):
                continue
            started_here = True  # (or tried: a failed start may have recorded its job)
            try:
                if how == "submit":
                    _submit(context, sweep, row, index, spec_path, (estimates or {}).get(index))
                else:
                    restarted.add(index)
                    _resume(context, jobs[index])
            except RunjobError as exc:
                not_started[index] = str(exc)
                context.event(jobs[index].id if index in jobs else None, "sweep_element_failed",
                              f"sweep {row.name} element {index} ({sweep.elements[index].name}) did not start: {exc}",
                              sweep=row.id, index=index)
                continue
            active.add(index)
        return active, element_jobs(store, row.id) if started_here else jobs, cancelled


def _over_budget(context, sweep, row, budget, jobs, active, index, not_started) -> bool:
    """Whether element *index* must not start now for its cluster's budget (recorded in
    *not_started*, with an event, when waiting cannot help)."""
    from runjob_core.sweep import _budget

    found = _budget.blocked(context, sweep, budget, jobs, active, index)
    if found is None:
        return False
    why, waiting = found
    if not waiting:
        not_started[index] = why
        context.event(jobs[index].id if index in jobs else None, "sweep_element_failed",
                      f"sweep {row.name} element {index} ({sweep.elements[index].name}) not started: {why}",
                      sweep=row.id, index=index)
    return True


def _start_arrays(context: RunContext, sweep: Sweep, row: SweepRow, jobs: dict[int, JobRow], active: set[int], *,
                  skip, limit: int, spec_path, estimates, not_started: dict[int, str]) -> set[int]:
    """The never-submitted elements whose backend makes arrays (``runjob_submit_array``), one
    request per resource shape with ``max_parallel`` as the array's own bound; the elements
    submitted that way."""
    from runjob_core.sweep import _array

    groups: dict[tuple[str, str], list[int]] = {}
    for index, (job, key) in enumerate(zip(sweep.jobs, shape_keys(sweep.jobs))):
        if index in active or index in skip or index in not_started or _startable(context.store, jobs.get(index)) != "submit":
            continue
        cluster = lifecycle.cluster_for(context, job)
        if _array.supported(context, cluster):
            groups.setdefault((cluster.name, key), []).append(index)
    started: set[int] = set()
    for indices in groups.values():
        if len(indices) < 2:
            continue  # one element: the ordinary submit below
        try:
            _array.submit_group(context, sweep, row, indices, limit=limit, spec_path=spec_path, estimates=estimates)
        except RunjobError as exc:
            for index in indices:
                not_started[index] = str(exc)
            context.event(None, "sweep_element_failed", f"sweep {row.name}: the array of elements "
                          f"{', '.join(map(str, indices))} was not submitted: {exc}", sweep=row.id)
            continue
        started.update(indices)
    return started


def _submit(context: RunContext, sweep: Sweep, row: SweepRow, index: int, spec_path: str | None, checks) -> None:
    job = sweep.jobs[index]
    cluster = lifecycle.cluster_for(context, job)
    job_row, _submission = lifecycle.submit(context, job, cluster, spec_path=spec_path, sweep=(row.id, index))
    if job_row.sweep_id != row.id or job_row.sweep_index != index:
        # The same spec was already submitted as a job of its own: it is this element now.
        context.store.set_job(job_row.id, sweep_id=row.id, sweep_index=index)
    if checks is not None:
        lifecycle.record_estimates(context.store, job_row, checks)


def _resume(context: RunContext, job: JobRow) -> None:
    from runjob_core import resume

    plan, latest = resume.plan(context, job)
    resume.resubmit(context, job, plan, after=latest.n)


def cancel(context: RunContext, row: SweepRow, *, wait: float | None = None, force: bool = False) -> dict[str, list[str]]:
    """Mark the sweep cancelled (no element starts any more, a running ``runjob run`` of it
    ends when its active elements do) and cancel every active element."""
    store = context.store
    store.set_sweep_state(row.id, "cancelled")
    context.event(None, "sweep_cancelled", f"sweep {row.name} ({row.id}) cancelled: no further element starts",
                  sweep=row.id)
    jobs = element_jobs(store, row.id)
    active = _active(store, jobs)
    return {jobs[i].id: lifecycle.cancel(context, jobs[i], wait=wait, force=force) for i in sorted(active)}
