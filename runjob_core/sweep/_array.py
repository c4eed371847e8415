"""Submitting a group of a sweep's elements that share a resource shape in one request
(``runjob_submit_array``: one SLURM job array), each still an ordinary job.

Each element gets its job row, its ``SUBMITTING`` attempt with its own tag, its rendered
script and its staged folder exactly as :func:`runjob_core.lifecycle.submit` makes them; then
the backend is asked once for all of them. A runjob killed at any point leaves each element
either without an attempt (submitted on the next run) or ``SUBMITTING`` with its tag (the
next run reattaches it through ``runjob_reattach``, which finds its array task, or submits it
alone): no element is submitted twice.
"""

from __future__ import annotations

import contextlib
import time

from runjob_core import _plugin_errors, config, lifecycle, staging
from runjob_core.context import RunContext
from runjob_core.errors import BackendError, RefusedError, RunjobError, TransportError
from runjob_core.store import JobRow, SweepRow, new_job_id
from runjob_core.sweep import _scripts


def supported(context: RunContext, cluster) -> bool:
    """Whether the cluster's backend implements ``runjob_submit_array``."""
    return bool(context.hook("runjob_submit_array", cluster.type).get_hookimpls())


def submit_group(context: RunContext, sweep, row: SweepRow, indices: list[int], *, limit: int,
                 spec_path: str | None = None, estimates: dict | None = None) -> None:
    # Each element's submit:<job id> is held from its attempt's start until its submission is
    # recorded, as lifecycle.submit holds it for one job: another process that finds the attempt
    # SUBMITTING meanwhile waits instead of reattaching (not found yet) and submitting it alone.
    from runjob_core.sweep._paused import collector_paused

    with collector_paused(), contextlib.ExitStack() as held, _fewer_lines(context, len(indices)):
        _submit_group(context, sweep, row, indices, limit=limit, spec_path=spec_path, estimates=estimates, held=held)


#: Elements whose "created" and "submitted" lines the terminal shows (every one is recorded).
SHOWN_ELEMENTS = 3


@contextlib.contextmanager
def _fewer_lines(context: RunContext, elements: int):
    """The terminal gets the first elements' "created" and "submitted" lines and one line for
    the rest, not 2,000 lines for a 1,000-element array; the store records every event
    (``runjob events``). A JSON event stream (``--json``) gets every event."""
    printer = context.on_event
    if not getattr(printer, "for_people", False) or elements <= SHOWN_ELEMENTS:
        yield
        return
    counts = {"created": 0, "submitted": 0}

    def show(event) -> None:
        if event.kind in counts:
            counts[event.kind] += 1
            if counts[event.kind] > SHOWN_ELEMENTS:
                return
        printer(event)

    context.on_event = show
    try:
        yield
    finally:
        context.on_event = printer
        more = {kind: n - SHOWN_ELEMENTS for kind, n in counts.items() if n > SHOWN_ELEMENTS}
        if more:
            from runjob_core.store import EventRow

            said = " and ".join(f"{n} more {kind}" for kind, n in more.items())
            printer(EventRow(0, None, None, time.time(), "submitted" if "submitted" in more else "created", "runjob",
                             f"... {said} (every line: runjob events)", {}))


def _submit_group(context: RunContext, sweep, row: SweepRow, indices: list[int], *, limit: int, spec_path, estimates,
                  held: contextlib.ExitStack) -> None:
    store = context.store
    cluster = lifecycle.cluster_for(context, sweep.jobs[indices[0]])
    transport = context.transport(cluster)
    # The rows recorded now, as written (not read back: ~13 ms of 1,000): {index: job row}.
    made = _record_fresh(context, sweep, row, indices, cluster, spec_path, held)
    for index in indices:
        if index not in made:
            made.update(_record_one(context, sweep, row, index, cluster, spec_path, held))
    fresh = [(made[index], sweep.jobs[index]) for index in indices if index in made]
    with lifecycle.templates_held(context) as templates:  # a new job's first attempt, and its script
        first = _scripts.first_attempts(context, cluster, [job for _row, job in fresh],
                                        [job_row.id for job_row, _job in fresh], templates)
    prepared = [(job_row, job, attempt, rendered)
                for (job_row, job), attempt, rendered in zip(fresh, first.attempts, first.rendereds)]
    if not prepared:
        return
    # Jobs made by this run (every one prepared here): none has its estimates yet.
    events = []
    for job_row, *_rest in prepared:
        checks = (estimates or {}).get(job_row.sweep_index)
        if checks is not None and checks.estimates:
            message, data = lifecycle.estimates_event(checks)
            events.append((job_row.id, "estimates", message, "runjob", None, data))
    if events:
        with store.transaction():  # one commit (a statement per 500)
            store.add_events(events)
    staged = [(attempt.layout, job, rendered, staging.job_record(job_row, context.state_dir))
              for job_row, job, attempt, rendered in prepared]
    # A backend that takes the folders' files puts them in place itself (SLURM: one bundle
    # each task unpacks when it starts); for any other, every element's folder goes in one
    # remote command (a 1,000-element array: one, not 1,000).
    folders = len(prepared) > 1 and _takes(context, cluster, "folders")
    codes = staging.stage_many(transport, staged, put_files=not folders)
    for (job_row, _job, attempt, _rendered), code in zip(prepared, codes):
        if code is not None:
            lifecycle._record_code(context, job_row.id, attempt.n, code)
    submissions = None
    if len(prepared) > 1:
        # A backend that takes the scripts' model makes each script itself: the folders go without.
        model = first.model if folders and _takes(context, cluster, "script_model") else None
        files = [staging.own_files(job, rendered, record, script=model is None)
                 for _layout, job, rendered, record in staged] if folders else None
        submissions = _ask(context, cluster, transport, prepared, limit, row.name, files, model)
    if submissions is None:  # one element, or the backend makes no array of these: each alone,
        # rendered, stored and staged by its own submit (a folder the backend was to write is written there)
        for job_row, job, attempt, _rendered in prepared:
            lifecycle._submit_attempt(context, job_row, job, cluster, attempt_row=store.attempt(job_row.id, attempt.n))
        return
    # One commit, the scripts with the states: a runjob killed before it leaves every element
    # SUBMITTING with its tag, found in the array by the next run (as a kill between sbatch and
    # recording always did), which stores the script then (lifecycle._reattach).
    pairs = list(zip(prepared, submissions))
    with store.transaction():
        store.record_submissions([(job_row.id, attempt.n, config.record_to_json(submission), submission.backend_job_id,
                                   submission.submitted_at) for (job_row, _job, attempt, _rendered), submission in pairs],
                                 scripts={job_row.id: rendered.script for job_row, _job, _attempt, rendered in prepared})
        context.events([(job_row.id, "submitted", f"attempt {attempt.n} submitted as {cluster.type} job "
                         f"{submission.backend_job_id} on {cluster.name} (one of an array of {len(prepared)})",
                         {"attempt": attempt.n, "source": submission.source, "backend_job_id": submission.backend_job_id,
                          "log": submission.log_path})
                        for (job_row, _job, attempt, _rendered), submission in pairs])


def _record_fresh(context: RunContext, sweep, row: SweepRow, indices: list[int], cluster, spec_path,
                  held: contextlib.ExitStack) -> dict[int, JobRow]:
    """The job and first attempt of every element no job of whose spec exists yet, in one
    transaction: {index: its job row, as written}. The others (a rerun's, or a spec another process is creating
    now) are left to :func:`_record_one`. Each element's spec lease is held while it is
    recorded, and its submit lease from before its attempt exists until it is submitted, as
    :func:`_record_one` holds them: taken and freed in batches (one commit each)."""
    store = context.store
    keys = {index: f"spec:{sweep.jobs[index].name}:{sweep.job_hashes[index]}:full" for index in indices}
    held_before = set(store.held_leases("spec:"))
    busy = store.try_leases([key for key in keys.values() if key not in held_before])
    taken = [index for index in indices if keys[index] not in busy]
    try:
        known = store.specs_with_jobs([(sweep.jobs[i].name, sweep.job_hashes[i]) for i in taken], "full")
        ids = {index: new_job_id() for index in taken if (sweep.jobs[index].name, sweep.job_hashes[index]) not in known}
        submit_keys = [f"submit:{job_id}" for job_id in ids.values()]
        store.try_leases(submit_keys)  # new ids: no other process knows them
        held.callback(store.release_leases, submit_keys)
        _fresh_ids(store, ids, held)
        with store.transaction():  # the rows and their "created" events: four statements, not 4,000
            written = store.begin_first_attempts([_job_fields(sweep, row, index, cluster, spec_path, job_id)
                                                  for index, job_id in ids.items()])
            context.events([(job_id, "created", _created(sweep, row, index, job_id), {}) for index, job_id in ids.items()])
        return dict(zip(ids, written))
    finally:
        store.release_leases([keys[index] for index in taken if keys[index] not in held_before])


def _fresh_ids(store, ids: dict[int, str], held: contextlib.ExitStack) -> None:
    """Give a new id to each element of *ids* whose id a job of the store already has: another
    process made the same one (31 random bits a second: two 1,000-element sweeps recorded in
    the same second share one about once in 2,000). Checked just before the transaction that
    records them (a lease is its own transaction): another process making one of these ids
    in between is left to the UNIQUE constraint."""
    taken = set(store.job_heads(list(ids.values())))  # the ids a job already has
    while taken:
        renamed = {index: new_job_id() for index, job_id in ids.items() if job_id in taken}
        keys = [f"submit:{job_id}" for job_id in renamed.values()]
        store.try_leases(keys)  # new ids again: held from before their attempts exist, as the others'
        held.callback(store.release_leases, keys)
        ids.update(renamed)
        taken = set(store.job_heads(list(renamed.values())))


def _record_one(context: RunContext, sweep, row: SweepRow, index: int, cluster, spec_path,
                held: contextlib.ExitStack) -> dict[int, JobRow]:
    """{index: job row} of an element recorded now, or {} when its spec already has a job to
    follow (another process submitted it meanwhile, or a rerun finds it): it is this element."""
    store = context.store
    job, spec_hash = sweep.jobs[index], sweep.job_hashes[index]
    with store.claim(f"spec:{job.name}:{spec_hash}:full"):
        followed = lifecycle._follow_existing(context, job, cluster, spec_hash, "full")
        if followed is not None:
            if followed[0].sweep_id != row.id:
                store.set_job(followed[0].id, sweep_id=row.id, sweep_index=index)
            return {}
        job_id = new_job_id()
        held.enter_context(store.claim(f"submit:{job_id}"))
        job_row = _create(context, sweep, row, index, cluster, spec_path, job_id)
    return {index: job_row}


def _create(context: RunContext, sweep, row: SweepRow, index: int, cluster, spec_path, job_id: str) -> JobRow:
    """Element *index*'s job row and its first attempt (SUBMITTING, with its tag); the row as written."""
    [job_row] = context.store.begin_first_attempts([_job_fields(sweep, row, index, cluster, spec_path, job_id)])
    context.event(job_id, "created", _created(sweep, row, index, job_id))
    return job_row


def _job_fields(sweep, row: SweepRow, index: int, cluster, spec_path, job_id: str) -> dict:
    """Element *index*'s job row, as :meth:`Store.create_job` takes it."""
    return {"job_id": job_id, "name": sweep.jobs[index].name, "cluster": cluster.name, "backend": cluster.type,
            "spec_json": sweep.job_jsons[index], "spec_hash": sweep.job_hashes[index], "spec_path": spec_path,
            "sweep_id": row.id, "sweep_index": index}


def _created(sweep, row: SweepRow, index: int, job_id: str) -> str:
    """The message of element *index*'s "created" event."""
    return (f"job {sweep.jobs[index].name} recorded as {job_id} (sweep {row.name} element {index}, "
            f"spec {sweep.job_hashes[index]})")


def _takes(context: RunContext, cluster, parameter: str) -> bool:
    """Whether the backend's ``runjob_submit_array`` names *parameter* (``folders``: it puts the
    files itself; ``script_model``: it makes each script from the model)."""
    return any(parameter in impl.argnames for impl in context.hook("runjob_submit_array", cluster.type).get_hookimpls())


def _ask(context: RunContext, cluster, transport, prepared: list, limit: int, name: str, folders: list | None,
         script_model=None):
    """``runjob_submit_array`` once for all of *prepared* (with their *folders*' files when the
    backend takes them, and the *script_model* their scripts were made from when it takes that);
    their submissions in order, or None."""
    first = prepared[0][0]
    from runjob_core.transport.held import HeldTree, hold_tree

    # Held: the files the backend writes go with its submit command, in one round trip.
    transport = hold_tree(transport)
    kwargs = {"jobs": [p[1] for p in prepared], "attempts": [p[2] for p in prepared],
              "rendereds": [p[3] for p in prepared], "name": name, "cluster": cluster, "transport": transport,
              "max_parallel": limit, "context": context, "folders": folders,
              "common_files": staging.job_side_files() if folders is not None else None, "script_model": script_model}
    try:
        submissions = _plugin_errors.call_first(context, context.hook("runjob_submit_array", cluster.type), kwargs,
                                                hook="runjob_submit_array", blame=cluster.type, job_id=first.id,
                                                attempt=prepared[0][2].n)
    except TransportError as exc:
        for job_row, _job, attempt, _rendered in prepared:
            context.event(job_row.id, "submit_uncertain", f"connection lost while submitting the array ({exc}); run the "
                          "same command again: it finds each element by its tag or submits it", attempt=attempt.n)
        raise
    except RunjobError as exc:
        for job_row, _job, attempt, _rendered in prepared:
            lifecycle._forget_attempt(context, job_row, attempt, cluster, reason=f"submit failed: {exc}")
            if not isinstance(exc, RefusedError):
                context.event(job_row.id, "rejected" if isinstance(exc, BackendError) else "submit_failed", str(exc),
                              attempt=attempt.n)
        raise
    if isinstance(transport, HeldTree):
        transport.flush()  # a backend that ran no command: what it wrote is in place all the same
    if submissions is not None and len(submissions) != len(prepared):
        raise BackendError(f"backend {cluster.type!r} answered runjob_submit_array with {len(submissions)} submissions "
                           f"for {len(prepared)} jobs")
    return submissions
