"""Harvest, then release: a machine rented for one attempt goes back as soon as it ended.

For a backend whose :class:`~runjob_core.models.BackendInfo` says ``machine_per_job`` (a
RunPod pod), the monitor calls :func:`settle` right after a poll said an attempt ended,
whatever the ending (completed, failed, cancelled, lost, timed out):

1. *harvest*: the attempt's log, GPU telemetry, progress file, metrics history and results
   folder are copied home through the attempt's transport into
   ``<state dir>/attempts/<tag>/`` (:mod:`runjob_core.transport.harvested`), a marker last;
2. *release*: ``runjob_release`` is called once (:func:`runjob_core.lifecycle.release`
   records ``released_at``, so it is never called twice).

From then on ``context.transport_for(submission)`` reads the copy: ``runjob logs``,
``report``, the health checks, resume and a ``runjob collect`` days later need no machine.
A paid machine no longer waits for a collect that may never come.

Nothing is left behind, whatever dies when: the attempt's end and its follow-up mark are
recorded in one transaction, so a runjob killed before the release (even ``kill -9``)
leaves an attempt that is ended, not released: the next ``runjob status`` or ``watch``
finds it (:func:`settle_leftovers`, :meth:`~runjob_core.store.Store.unreleased_machines`)
and settles it. So does a release that failed (the provider's API down, a terminate that
did not take), retried every :data:`RETRY_SECONDS`. One process settles an attempt at a
time (the ``settle:<job>:<n>`` lease). A machine that cannot be reached is kept (and
retried) for :data:`HARVEST_PATIENCE` seconds, then released anyway, its copy marked
incomplete; a machine reported ``LOST`` is released after one try.
"""

from __future__ import annotations

import posixpath
import time
from pathlib import Path

from runjob_core import collecting, lifecycle
from runjob_core.context import RunContext
from runjob_core.errors import TransportError
from runjob_core.gpu import telemetry
from runjob_core.models import CANCELLED, LOST, Submission
from runjob_core.reporting import history
from runjob_core.store import AttemptRow, JobRow
from runjob_core.transport import harvested

#: How long a machine that cannot be reached is kept after its attempt ended, its copy
#: retried, before it is released without one (its files are then lost).
HARVEST_PATIENCE = 600.0
#: A failed harvest or release is tried again after this long (not every monitor cycle).
RETRY_SECONDS = 30.0
#: The lease one process holds while it settles an attempt.
LEASE_SECONDS = 900.0


def settle(context: RunContext, row: JobRow, n: int, *, ended: str) -> bool:
    """Harvest attempt *n* of *row*, which ended in state *ended*, and release its machine,
    if it has one not released yet (a standing cluster's attempt has none: nothing is
    done). True when released."""
    attempt = context.store.attempt(row.id, n)
    if attempt.machine is None or attempt.released_at is not None:
        return False
    key = f"settle:{row.id}:{n}"
    if context.store.try_lease(key, ttl=LEASE_SECONDS) is not None:
        return False  # another runjob process is settling it right now
    try:
        attempt = context.store.attempt(row.id, n)  # as it is now that this process holds it
        if attempt.released_at is not None:
            return False
        submission = attempt.submission
        if submission is not None and not harvested.is_harvested(context.state_dir, submission.tag):
            if not _harvest(context, attempt, submission):
                return False  # kept, tried again later
        reason = "cancelled" if ended == CANCELLED else f"ended {ended}"
        lifecycle.release(context, row.id, n, attempt.machine, submission, lifecycle.job_cluster(context, row),
                          reason=reason)
        return context.store.attempt(row.id, n).released_at is not None
    finally:
        context.store.release_lease(key)


def unsettled(context: RunContext, job_ids: list[str] | None) -> set[str]:
    """The jobs among *job_ids* with an ended attempt whose machine is still out (``runjob
    status`` refreshes them as it does active ones)."""
    if not _rents_machines(context):
        return set()
    return {attempt.job_id for attempt in context.store.unreleased_machines(job_ids)}


def _rents_machines(context: RunContext) -> bool:
    return any(context.backend_info(c.type).machine_per_job for c in context.clusters.values())


def settle_leftovers(context: RunContext, job_ids: list[str] | None) -> bool:
    """Settle the ended attempts of *job_ids* (all when None) whose machine is still out:
    left by a runjob that died between an attempt's end and its release, or by a harvest
    or release that failed (each retried at most every :data:`RETRY_SECONDS`)."""
    if not _rents_machines(context):
        return False  # no cluster rents machines: not even a query
    done = False
    for attempt in context.store.unreleased_machines(job_ids):
        if _tried_lately(context, attempt):
            continue
        row = context.store.get_job(attempt.job_id)
        done = settle(context, row, attempt.n, ended=attempt.state) or done
    return done


def _tried_lately(context: RunContext, attempt: AttemptRow) -> bool:
    failures = context.store.events(attempt.job_id, kinds=("harvest_failed", "release_failed"))
    last = max((e.ts for e in failures if e.attempt == attempt.n), default=None)
    return last is not None and time.time() - last < RETRY_SECONDS


def _harvest(context: RunContext, attempt: AttemptRow, submission: Submission) -> bool:
    """Copy the attempt's files home; True when the copy is final (complete, or given up
    on). A machine that cannot be reached is kept while :data:`HARVEST_PATIENCE` lasts."""
    root = harvested.folder(context.state_dir, submission.tag)
    machine = submission.machine
    try:
        counts = _copy(context.transport_for(submission), submission, root)
    except TransportError as exc:
        ended = attempt.ended_at or attempt.submitted_at or 0.0
        patience = 0.0 if attempt.state == LOST else HARVEST_PATIENCE
        if time.time() - ended < patience:
            context.event(attempt.job_id, "harvest_failed", f"attempt {attempt.n}: could not copy its files off machine "
                          f"{machine.id} ({exc}); the machine is kept and the copy tried again", attempt=attempt.n)
            return False
        note = f"incomplete: {exc}"
        context.event(attempt.job_id, "harvest_failed", f"attempt {attempt.n}: could not copy its files off machine "
                      f"{machine.id} ({exc}); releasing it anyway (what it held is lost)", attempt=attempt.n)
    else:
        files, size = counts
        note = f"complete: {files} files, {size} bytes"
        context.event(attempt.job_id, "harvested", f"attempt {attempt.n}: log, progress and results ({files} files, "
                      f"{size / 1e6:.1f} MB) copied off machine {machine.id}", attempt=attempt.n, files=files, bytes=size)
    root.mkdir(parents=True, exist_ok=True)
    marker = root / harvested.MARKER
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(note + "\n")
    tmp.replace(marker)
    return True


def _copy(transport, submission: Submission, root: Path) -> tuple[int, int]:
    """Log, telemetry, progress, metrics history and the results tree: (files, bytes)."""
    files = size = 0
    singles = (submission.log_path, telemetry.path_of(submission), submission.progress_path,
               posixpath.join(posixpath.dirname(submission.progress_path), history.HISTORY_FILE))
    for path in singles:
        info = transport.stat(path)
        if info is not None:
            transport.get_file(path, harvested.local_path(root, path))
            files, size = files + 1, size + info.size
    results = submission.results_dir.rstrip("/")
    local_results = harvested.local_path(root, results)
    for info in transport.listdir_recursive(results):
        # The job names its files: each lands inside the copy or not at all (collect then
        # reports what is missing, as from any machine).
        target, _why = collecting.destination(local_results, info.path)
        if target is not None:
            transport.get_file(f"{results}/{info.path}", target)
            files, size = files + 1, size + info.size
    return files, size
