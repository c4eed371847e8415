"""runjob for lab tooling: the stable Python API, importable from one place.

Everything a script needs to plan, submit, follow, collect and report jobs, with the same
gate as the CLI (cluster, canary, pre-flight, refusal) on by default::

    from runjob_core import api

    base = api.load_job("examples/hello.yaml")
    with api.open() as rj:
        jobs = [rj.submit(api.variant(base, name=f"hello-q{n}", params={"questions": n})) for n in (5, 10, 20)]
        for state in rj.wait(jobs):
            print(state.name, state.state, rj.collect(state).ok)

The names in ``__all__`` are the stable API (semantic versioning applies to them); the
modules behind them (``lifecycle``, ``monitor``, ``store``) may change between releases.
Records are frozen attrs classes. Expected failures raise :class:`RunjobError`
subclasses (:class:`RefusedError` when pre-flight or a failed canary refuses a job).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from runjob_core.errors import (
    BackendError, ConfigError, JobNotFoundError, RefusedError, RunjobError, TransportError, UnknownBackendError,
    WaitTimeoutError,
)
from runjob_core.lifecycle import Collected
from runjob_core.models import ACTIVE_STATES, JobSpec, Rendered

__all__ = [
    "BackendError", "Collected", "ConfigError", "ElementRef", "JobNotFoundError", "JobRef", "JobState", "Plan",
    "RefusedError", "RunResult", "RunjobError", "Session", "SweepRef", "TransportError", "UnknownBackendError",
    "WaitTimeoutError",
    "job_from_dict", "load_job", "open", "variant",
]


# ----------------------------------------------------------------------------- records


@attrs.frozen
class JobRef:
    """A submitted runjob job: what :meth:`Session.submit` returns and every other method takes."""

    #: The runjob id (``rj-...``), stable across attempts.
    id: str
    name: str
    cluster: str
    #: ``full`` or ``canary``.
    kind: str
    #: What pre-flight warned about when this job was submitted (it was submitted anyway);
    #: empty for a job that was already running and is followed instead.
    warnings: tuple[str, ...] = ()


@attrs.frozen
class JobState:
    """Where a job stands, as the state store records it."""

    id: str
    name: str
    cluster: str
    kind: str
    #: The latest attempt's state (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ...).
    state: str
    #: How many attempts ran (resumes and retries included).
    attempts: int
    #: runjob's word on how it ended (``completed``, ``stopped: nan_loss: ...``), or ``None``.
    outcome: str | None
    exit_code: int | None
    rows_done: int | None
    step: int | None
    #: Seconds the latest attempt has run (or ran).
    elapsed: float | None

    @property
    def done(self) -> bool:
        return self.state not in ACTIVE_STATES and self.state != NOT_SUBMITTED

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED"


#: The state of a sweep's element no job was submitted for yet (waiting for a free slot, refused
#: by pre-flight, or not started: its :attr:`JobState.outcome` says which). Not :attr:`JobState.done`.
NOT_SUBMITTED = "NOT_SUBMITTED"


@attrs.frozen
class ElementRef:
    """One element of a sweep: what :meth:`Session.sweep` returns for each, and what every job
    method takes (:meth:`Session.status`, :meth:`~Session.wait`, :meth:`~Session.report`,
    :meth:`~Session.collect`, :meth:`~Session.cancel`, :meth:`~Session.resume`). It stands for
    the element, not for one job: before the element is submitted its state is ``NOT_SUBMITTED``."""

    sweep_id: str
    index: int
    #: The element's name (``lr-0.1_seed-2``); its job is :attr:`job`.
    name: str
    #: The name of the element's job (``grid-lr-0.1_seed-2``).
    job: str
    #: Every swept key's value for this element (``{"lr": 0.1, "seed": 2}``).
    values: dict[str, Any]
    #: Why pre-flight refused the element (it is not started unless the sweep was forced).
    refused: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """``SWEEP_ID/INDEX``: the reference the CLI takes for this element (``runjob logs``)."""
        return f"{self.sweep_id}/{self.index}"


@attrs.frozen
class SweepRef:
    """A recorded sweep (:meth:`Session.sweep`): its id, its elements in order, and which keys vary."""

    id: str
    name: str
    elements: tuple[ElementRef, ...]
    varying: tuple[str, ...]
    #: ``max_parallel`` in force: how many elements are active at once.
    max_parallel: int
    #: Pre-flight warnings by element index (submitted anyway).
    warnings: dict[int, tuple[str, ...]] = attrs.field(factory=dict)

    def element(self, index: int | None = None, **values: Any) -> ElementRef:
        """One element, by index or by its values (``grid.element(lr=0.1, seed=2)``)."""
        found = [e for e in self.elements if (index is None or e.index == index)
                 and all(e.values.get(k, _MISSING) == v for k, v in values.items())]
        if len(found) != 1:
            raise JobNotFoundError(f"sweep {self.name}: {len(found)} elements match "
                                   f"{index if index is not None else values} (elements 0 to {len(self.elements) - 1})")
        return found[0]


_MISSING = object()


@attrs.frozen
class Plan:
    """Pre-flight without submitting: estimates, problems, warnings and the rendered script."""

    estimates: tuple[Any, ...]
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    rendered: Rendered
    review: tuple[tuple[str, str], ...]

    @property
    def refused(self) -> bool:
        return bool(self.problems)


@attrs.frozen
class RunResult:
    """The library version of ``runjob run``: final state, what was collected, the report."""

    state: JobState
    collected: Collected | None
    report: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.state.ok and self.collected is not None and self.collected.ok


# ----------------------------------------------------------------------------- job specs


def load_job(path: str | Path) -> JobSpec:
    """Load and validate a job file (one :class:`ConfigError` listing every problem)."""
    from runjob_core import config

    return config.load_job(Path(path))


def job_from_dict(data: Mapping[str, Any], *, source: str = "<python>", base_dir: str | Path = ".") -> JobSpec:
    """Validate a job given as a mapping (the same keys as a job file)."""
    from runjob_core import config

    return config.job_from_mapping(dict(data), source=source, base_dir=str(base_dir))


def variant(job: JobSpec, *, name: str | None = None, params: Mapping[str, Any] | None = None, **changes: Any) -> JobSpec:
    """A copy of *job* for a sweep: a new ``name`` (each point needs its own), ``params``
    merged over the job's, and any other top-level field replaced. The copy is validated
    again, so a bad value fails here, before anything is submitted."""
    from runjob_core import config

    data = config.unstructure(job)
    data.pop("source", None)
    base_dir = data.pop("base_dir", ".")
    if name is not None:
        data["name"] = name
    if params:
        data["params"] = {**data.get("params", {}), **params}
    data.update(changes)
    return job_from_dict(data, source=f"{job.source} (variant {data['name']})", base_dir=base_dir)


# ----------------------------------------------------------------------------- the session


def open(*, clusters: str | Path | None = None, on_event: Callable[[Any], None] | None = None) -> Session:  # noqa: A001
    """Open the state store of the working directory (``$RUNJOB_HOME`` or ``./.runjob``)
    with the installed plugins and the clusters of ``clusters.yaml``. Use it as a context
    manager, or call :meth:`Session.close`."""
    from runjob_core import lifecycle

    context = lifecycle.open_context(clusters_path=Path(clusters) if clusters else None, on_event=on_event)
    return Session(context)


class Session:
    """One open state store and its connections; every job method takes a :class:`JobRef`,
    a :class:`JobState` or a job id / name."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._context.close()

    # -- before submitting

    def plan(self, job: JobSpec, *, canary: bool = False) -> Plan:
        """Pre-flight and render *job* without submitting anything."""
        from runjob_core import lifecycle

        context = self._context
        cluster = lifecycle.cluster_for(context, job)
        if canary:
            job = lifecycle.apply_canary(job)
        checks = lifecycle.preflight(context, job, cluster, canary=canary)
        rendered = lifecycle.render_preview(context, job, cluster, limit=job.canary.limit if canary else None)
        return Plan(checks.estimates, checks.problems, checks.warnings, rendered,
                    tuple(lifecycle.review_rows(job, cluster, rendered)))

    # -- submitting

    def submit(self, job: JobSpec, *, canary: bool = False, force: bool = False, new: bool = False,
               failed_canary: bool = False, spec_path: str | None = None) -> JobRef:
        """Submit *job* through the same gate as ``runjob submit``: pre-flight problems and a
        failed last canary raise :class:`RefusedError` unless *force* / *failed_canary*.
        The same spec already running is followed, not submitted twice (unless *new*)."""
        from runjob_core import lifecycle

        launched = lifecycle.launch(self._context, job, spec_path=spec_path or job.source, canary=canary, force=force,
                                    new=new, failed_canary=failed_canary)
        checks = launched.preflight  # problems are here only when *force* submitted the job anyway
        warnings = (*checks.problems, *checks.warnings) if checks is not None else ()
        return attrs.evolve(_ref(launched.row), warnings=warnings)

    def run(self, job: JobSpec, *, canary: bool = False, force: bool = False, new: bool = False,
            failed_canary: bool = False, timeout: float | None = None) -> RunResult:
        """``runjob run`` as a function: submit, wait (resumes included), collect, report."""
        ref = self.submit(job, canary=canary, force=force, new=new, failed_canary=failed_canary)
        [state] = self.wait([ref], timeout=timeout)
        collected = self.collect(ref) if state.ok else None
        return RunResult(self.status(ref), collected, self.report(ref))

    def sweep(self, spec: str | Path | Mapping[str, Any], *, force: bool = False, skip_refused: bool = False,
              allow_large: bool = False, base_dir: str | Path | None = None) -> SweepRef:
        """Record and start a sweep (a spec with a ``sweep:`` key: a file, or a mapping whose
        relative paths are read from *base_dir*), as ``runjob submit SWEEP.yaml`` does:
        pre-flight once per resource shape, :class:`RefusedError` naming the refused elements
        unless *skip_refused* (run the others) or *force* (submit them all); the first
        ``max_parallel`` elements are submitted, the others start while :meth:`wait` follows
        them. The same spec again returns the same sweep and submits nothing twice."""
        from runjob_core.sweep import _session

        loaded = _session.load(spec, base_dir=base_dir, allow_large=allow_large)
        spec_path = None if isinstance(spec, Mapping) else str(spec)
        opened = _session.open_sweep(self._context, loaded, force=force, skip_refused=skip_refused, spec_path=spec_path)
        refused = {} if force else opened.refused
        elements = tuple(ElementRef(sweep_id=opened.row.id, index=e.index, name=e.name, job=loaded.jobs[e.index].name,
                                    values=dict(e.values), refused=tuple(refused.get(e.index, ())))
                         for e in loaded.elements)
        return SweepRef(id=opened.row.id, name=opened.row.name, elements=elements, varying=loaded.varying,
                        max_parallel=opened.limit, warnings=opened.warnings)

    def sweep_report(self, sweep: SweepRef | str) -> dict[str, Any]:
        """The combined report of a sweep (the document ``runjob report SWEEP --json`` prints)."""
        from runjob_core.sweep import _report

        ref = sweep.id if isinstance(sweep, SweepRef) else sweep
        row = self._context.store.find_sweep(ref)
        if row is None:
            raise JobNotFoundError(f"no sweep with name or id {ref!r} in {self._context.store.path}")
        return _report.build(self._context.store, row, clusters=self._context.clusters, hook=self._context.pm.hook)

    # -- following

    def status(self, job: JobRef | JobState | str) -> JobState:
        """The job's state as last recorded (call :meth:`refresh` or :meth:`wait` to poll)."""
        store = self._context.store
        if isinstance(job, ElementRef):
            from runjob_core.sweep import _address

            found = _address.resolve(store, job.ref)
            if found.job is None or not store.attempts(found.job.id):
                why = f"refused by pre-flight: {'; '.join(job.refused)}" if job.refused else "waiting for a free slot"
                return JobState(id="", name=job.job, cluster="", kind="full", state=NOT_SUBMITTED, attempts=0,
                                outcome=why, exit_code=None, rows_done=None, step=None, elapsed=None)
            row = found.job
        else:
            row = self._find(job)
        attempts = store.attempts(row.id)
        latest = attempts[-1] if attempts else None
        elapsed = None
        if latest is not None and latest.started_at:
            elapsed = (latest.ended_at or time.time()) - latest.started_at
        return JobState(
            id=row.id, name=row.name, cluster=row.cluster, kind=row.kind, state=latest.state if latest else row.state,
            attempts=len(attempts), outcome=row.outcome, exit_code=latest.exit_code if latest else None,
            rows_done=latest.rows_done if latest else None, step=latest.step if latest else None, elapsed=elapsed,
        )

    def refresh(self, jobs: Iterable[JobRef | JobState | str]) -> list[JobState]:
        """Poll the jobs' backends once (batched per cluster), run the health checks, apply
        their actions (resume, stop), and return the new states."""
        from runjob_core.monitor import Monitor

        ids = self._ids(jobs)
        Monitor.of(self._context).cycle(ids)
        return [self.status(job_id) for job_id in ids]

    def wait(self, jobs: Iterable[JobRef | JobState | str], *, timeout: float | None = None,
             on_cycle: Callable[[list[JobState]], None] | None = None) -> list[JobState]:
        """Follow *jobs* until every one has ended (automatic resumes included), as ``runjob
        watch`` does: the invocation's :class:`~runjob_core.monitor.Monitor` polls each
        cluster once per cycle, backs off while nothing changes and is woken by the push
        path when a job's log or markers change. Raises :class:`WaitTimeoutError` (a
        :class:`RunjobError` and a :class:`TimeoutError`) after *timeout* seconds; the jobs
        keep running."""
        from runjob_core.monitor import Monitor

        jobs = list(jobs)
        if any(isinstance(job, ElementRef) for job in jobs):
            return self._wait_elements(jobs, timeout=timeout, on_cycle=on_cycle)
        ids = self._ids(jobs)
        if not ids:
            return []
        until = None if timeout is None else time.monotonic() + timeout
        context = self._context
        clusters = {context.store.get_job(job_id).cluster for job_id in ids}
        infos = [context.backend_info(context.clusters[c].type) for c in clusters if c in context.clusters]
        interval = min([i.poll_interval for i in infos] or [1.0])
        longest = max([i.max_poll_interval for i in infos] or [30.0])
        show = None if on_cycle is None else (lambda _result: on_cycle([self.status(job_id) for job_id in ids]))
        result = Monitor.of(context).watch(ids, min_interval=min(interval, 0.5), max_interval=longest, on_cycle=show,
                                           until=until)
        states = [self.status(job_id) for job_id in ids]
        if result.finished >= set(ids):
            return states
        waiting = ", ".join(s.name for s in states if not s.done)
        raise WaitTimeoutError(f"still running after {timeout:g} s: {waiting}")

    def _wait_elements(self, jobs: list, *, timeout: float | None,
                       on_cycle: Callable[[list[JobState]], None] | None) -> list[JobState]:
        """:meth:`wait` over sweep elements: each starts when its sweep's ``max_parallel``
        leaves a slot, and each that completes is collected (``runjob run`` of a sweep does the
        same, so :meth:`sweep_report` has its results)."""
        from runjob_core.sweep import _session

        store = self._context.store
        wanted = []
        for job in jobs:
            if isinstance(job, ElementRef):
                wanted.append(_session.Wanted(job.sweep_id, job.index, bool(job.refused)))
                continue
            row = self._find(job)  # an element given by its job's id or name
            if row.sweep_id is None:
                raise RunjobError(f"{_key(job)} is not an element of a sweep: wait for sweep elements and other jobs "
                                  "in two calls")
            wanted.append(_session.Wanted(row.sweep_id, row.sweep_index, False))
        handles = [job if isinstance(job, ElementRef) else _element(store, w) for job, w in zip(jobs, wanted)]

        def states(not_started: dict) -> list[JobState]:
            out = []
            for handle in handles:
                state = self.status(handle)
                why = not_started.get((handle.sweep_id, handle.index))
                out.append(attrs.evolve(state, outcome=f"did not start: {why}") if why and state.state == NOT_SUBMITTED
                           else state)
            return out

        deadline = None if timeout is None else time.monotonic() + timeout
        return _session.follow(self._context, wanted, deadline=deadline, states=states, on_cycle=on_cycle)

    # -- after

    def collect(self, job: JobRef | JobState | str) -> Collected:
        """Download the results into ``./results/<name>/``, publish and validate them. A job
        that is still running is refused (:class:`RefusedError`, "still running"): wait first."""
        from runjob_core import lifecycle

        state = self.status(job)
        if not state.done:
            raise RefusedError(f"{state.name} ({state.id}) is still running ({state.state}); "
                               f"collect it once it has ended (Session.wait)")
        return lifecycle.collect(self._context, self._find(job))

    def report(self, job: JobRef | JobState | str) -> dict[str, Any]:
        """The results report (the same document as ``runjob report --json``)."""
        from runjob_core.reporting.report import build_report

        store = self._context.store
        return build_report(store, self._find(job))

    def resume(self, job: JobRef | JobState | str) -> JobRef:
        """Resume a job that stopped early, from its newest complete checkpoint."""
        from runjob_core import resume

        row = self._find(job)
        plan, latest = resume.plan(self._context, row)
        resume.resubmit(self._context, row, plan, after=latest.n)
        return _ref(row)

    def cancel(self, job: JobRef | JobState | str, *, wait: float = 60.0, force: bool = False) -> list[str]:
        """Cancel the job's active attempts and wait (up to *wait* seconds) until a poll of the
        backend confirms each ended; returns the backend ids asked. A job that had ended
        before the cancel arrived keeps its own ending (``status(job).state``).

        :raises runjob_core.errors.RunjobError: the backend refused, or the job still runs
            after *wait* (``CancelNotConfirmedError``, with the backend's words). With
            *force* such a job is forgotten instead, which does NOT stop it.
        """
        from runjob_core import lifecycle

        return lifecycle.cancel(self._context, self._find(job), wait=wait, force=force)

    def forget(self, job: JobRef | JobState | str) -> list[int]:
        """Stop following a job whose backend cannot be reached (``FORGOTTEN``; nothing is
        stopped). Returns the attempt numbers forgotten."""
        from runjob_core import lifecycle

        return lifecycle.forget(self._context, self._find(job))

    def jobs(self, *, limit: int = 50) -> list[JobState]:
        """The most recent jobs of this state store."""
        return [self.status(row.id) for row in self._context.store.list_jobs(limit=limit)]

    def _ids(self, jobs: Iterable[JobRef | JobState | ElementRef | str]) -> list[str]:
        return [self._find(job).id for job in jobs]

    def _find(self, job: JobRef | JobState | ElementRef | str) -> Any:
        """The job's row: by id or name, or a sweep element (``SWEEP/ELEMENT``, :class:`ElementRef`)."""
        from runjob_core.sweep import _address

        return _address.find_job(self._context.store, _key(job))


def _key(job: JobRef | JobState | ElementRef | str) -> str:
    if isinstance(job, str):
        return job
    return job.ref if isinstance(job, ElementRef) else job.id


def _element(store: Any, wanted: Any) -> ElementRef:
    """The handle of an element given by its job's id or name."""
    row = store.find_sweep(wanted.sweep_id)
    record = row.elements[wanted.index]
    return ElementRef(sweep_id=row.id, index=wanted.index, name=record["name"], job=record["job"],
                      values=dict(record["values"]))


def _ref(row: Any) -> JobRef:
    return JobRef(id=row.id, name=row.name, cluster=row.cluster, kind=row.kind)

