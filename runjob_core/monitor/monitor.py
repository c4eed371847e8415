"""The :class:`Monitor`: one object follows the jobs of an invocation and owns everything
that lasts from one cycle to the next.

A cycle reads as: poll each cluster once (batched, whatever the number of its jobs), then
observe each job whose answer or files changed (:mod:`runjob_core.monitor.observe`). Killed
and restarted, a monitor carries on from the log offsets and states in the store; what it
keeps in memory only spares work (re-reading, re-parsing, re-leasing).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from runjob_core import _plugin_errors
from runjob_core.collecting import harvest
from runjob_core.errors import RunjobError, TransportError
from runjob_core.models import ACTIVE_STATES, LOST, JobStatus, Submission
from runjob_core.monitor import endings, observe
from runjob_core.monitor import memo as _memo
from runjob_core.monitor import push as _push
from runjob_core.monitor.state import MonitorState
from runjob_core.monitor.views import CycleResult, JobView, view_of
from runjob_core.store import AttemptRow, JobHead
from runjob_core.store.faults import StoreTransientError

if TYPE_CHECKING:
    from runjob_core.context import RunContext

#: A monitor that only follows (another one observes) reads the store at least this often.
FOLLOW_INTERVAL = 2.0

#: What a cluster's poll hands on to be observed: (attempt, its submission, its status, the
#: push path's causes or None).
Look = tuple[AttemptRow, Submission, JobStatus, set[str] | None]


@attrs.define
class _Pass:
    """One cycle's working state (gone when the cycle returns)."""

    job_ids: list[str] | None
    woken: dict[str, set[str]] | None
    keep_leases: bool
    heads: dict[str, JobHead]
    #: Jobs another process observes: shown from the store, not written.
    followed: set[str]
    changed: bool = False
    views: dict[str, JobView] = attrs.field(factory=dict)
    #: Job id -> its state before this cycle, for the jobs observed.
    observed: dict[str, str] = attrs.field(factory=dict)
    #: Jobs whose backend's poll keeps failing (marked with what to do).
    unreachable: set[str] = attrs.field(factory=set)


@attrs.define(eq=False)
class Monitor(MonitorState):
    """Follows jobs: :meth:`cycle` once, or :meth:`watch` until they end. One per
    :class:`~runjob_core.context.RunContext` (:meth:`of`), so ``runjob status``, ``runjob
    watch``, ``runjob logs -f`` and :meth:`runjob_core.api.Session.wait` share what it
    remembers (its attributes: :class:`~runjob_core.monitor.state.MonitorState`)."""

    @classmethod
    def of(cls, context: RunContext) -> Monitor:
        """The context's monitor, made on first use: what it remembers lasts as long as the context."""
        monitor = context.monitor
        if monitor is None:
            monitor = context.monitor = cls(context)
        return monitor

    # ------------------------------------------------------------------ one cycle

    def cycle(self, job_ids: list[str] | None = None, *, woken: dict[str, set[str]] | None = None,
              keep_leases: bool = False) -> CycleResult:
        """One monitoring pass: poll each cluster, observe each job that changed.

        *woken* (from :meth:`PushWatch.wait_for_wakeup`) limits it to the jobs the push path
        reported: the scheduler is polled only if one of them needs it (a start or end
        marker), the others' new log lines are read with their last status. The jobs this
        monitor observes are leased to it; *keep_leases* (:meth:`watch`) keeps them between
        cycles, else a job is leased only when it has something to record."""
        _plugin_errors.next_cycle(self.context)
        grouped, heads = self.memo.groups(self.context.store, job_ids, self.submission)
        by_cluster, followed = self.leases.hold(grouped) if keep_leases else self.leases.held_elsewhere(grouped)
        run = _Pass(job_ids, woken, keep_leases, heads, followed)
        run.changed = endings.finish_pending(self, job_ids)
        run.changed = harvest.settle_leftovers(self.context, job_ids) or run.changed  # machines a killed runjob left out
        for cluster_name, (group, submissions) in by_cluster.items():
            cluster = self._cluster(cluster_name, group)
            if cluster is None:
                continue
            watch = self.push.for_cluster(cluster)
            for attempt, submission, status, causes in self._poll_cluster(run, cluster, watch, group, submissions):
                self._observe_job(run, cluster, watch, attempt, submission, status, causes)
        self.push.clean_up()
        return self._result(run)

    def _cluster(self, name: str, group: list[AttemptRow]):
        cluster = self.context.clusters.get(name)
        if cluster is None:
            for attempt in group:
                self.context.event(attempt.job_id, "warning", f"cluster {name!r} is not in clusters.yaml; cannot poll",
                                   attempt=attempt.n)
        return cluster

    def _poll_cluster(self, run: _Pass, cluster, watch: _push.Watch | None, group: list[AttemptRow],
                      submissions: list[Submission]) -> list[Look]:
        """Ask the cluster's backend about its jobs (one batched poll; none when the push path
        woke the monitor only for log lines) and pick the jobs worth observing; the others
        keep the view they had."""
        seen, views, woken = self.memo.seen, run.views, run.woken
        pushed = watch is not None and watch.alive
        polled = _push.needs_poll(group, woken, seen)
        statuses: dict[str, JobStatus] = {}
        if polled:
            answer = self._poll(run, cluster, group, submissions)
            if answer is None:
                return []
            statuses = answer
        to_observe: list[Look] = []
        for attempt, submission in zip(group, submissions):
            job_id = attempt.job_id
            last = seen.get(job_id)
            causes = woken.get(job_id) if woken else None
            if polled:
                status = statuses.get(attempt.backend_job_id) or JobStatus(
                    state=LOST, source="runjob-core", reason="the backend did not report this job"
                )
                # The common case at scale, inlined: a queued job whose status object came back as is.
                if last is not None and last.queued and status is last.status and attempt is last.attempt and not causes:
                    views[job_id] = last.view
                    continue
            elif causes and last is not None:
                status = last.status
            elif last is not None:
                views[job_id] = last.view
                continue
            else:
                continue  # not polled yet and nothing known: the next full poll looks at it
            if not causes and _memo.unchanged(last, attempt, status, pushed=pushed):
                views[job_id] = last.view
                continue
            to_observe.append((attempt, submission, status, causes))
        if not run.keep_leases:
            to_observe = self.leases.to_record(to_observe, run.followed)
        return to_observe

    def _poll(self, run: _Pass, cluster, group: list[AttemptRow], submissions: list[Submission]) -> dict[str, JobStatus] | None:
        """The backend's statuses of *submissions*, or None when the poll failed (said per job)."""
        context = self.context
        try:
            statuses = context.hook("runjob_poll", cluster.type)(submissions=submissions, cluster=cluster, context=context) or {}
        except RunjobError as exc:
            # Transient (a TransportError is one: the connection dropped; it reconnects next cycle).
            for attempt in group:
                context.event(attempt.job_id, "transient", f"poll failed, will retry: {exc}", attempt=attempt.n)
            return None
        except Exception as exc:  # a bug in the backend: its own jobs wait, every other cluster carries on
            run.unreachable |= _plugin_errors.poll_failed(context, group, "runjob_poll", cluster.type, exc)
            return None
        self.push.count_poll(run.woken, group, cluster.name)
        return statuses

    def _observe_job(self, run: _Pass, cluster, watch: _push.Watch | None, attempt: AttemptRow, submission: Submission,
                     status: JobStatus, causes: set[str] | None) -> None:
        job_id = attempt.job_id
        run.observed[job_id] = attempt.state
        try:
            if observe.observe(self, cluster, run.heads[job_id], attempt, submission, status, run.views,
                               trigger=self.push.trigger(job_id, causes)):
                run.changed = True
        except TransportError as exc:
            # The poll answered but the job's machine did not (its log, progress): nothing
            # of this job was recorded, so the next cycle reads it again.
            self.context.event(job_id, "transient", f"reading the job's files failed, will retry: {exc}", attempt=attempt.n)
            run.observed.pop(job_id, None)
            return
        view = run.views[job_id]
        self.memo.remember(attempt, status, view)
        self.push.track(watch, attempt, submission, status, causes, stopping=(view.outcome or "").startswith("stopped"))

    def _result(self, run: _Pass) -> CycleResult:
        """The cycle's views, and which of the asked-for jobs are over."""
        store = self.context.store
        views, job_ids, observed, followed = run.views, run.job_ids or [], run.observed, run.followed
        state_changed = any(views[j].state != s for j, s in observed.items())
        finished = set()
        for job_id in followed:
            if job_id not in job_ids:
                row, latest = store.get_job(job_id), store.latest_attempt(job_id)
                views[job_id] = view_of(row.id, row.name, latest, row.outcome)
        for job_id in job_ids:
            if job_id in views and job_id not in followed:
                # Ended in this very cycle (a resubmitted job shows RESUBMITTED): no extra cycle to learn it.
                if job_id in observed and views[job_id].state not in ACTIVE_STATES and views[job_id].state != "RESUBMITTED":
                    finished.add(job_id)
                continue
            row = store.get_job(job_id)
            latest = store.latest_attempt(job_id)
            # Ended, unless the process observing it is still deciding what follows (a resume).
            observer = self.leases.holder(job_id)
            pending = bool(store.pending_actions([job_id]))
            if (latest is None or latest.state not in ACTIVE_STATES) and observer in (None, store.owner) and not pending:
                finished.add(job_id)
            views[job_id] = view_of(row.id, row.name, latest, row.outcome)
        # A job whose backend cannot be asked any more is over for this watch (it says what to do).
        finished |= run.unreachable & set(job_ids)
        if not run.keep_leases:
            self.leases.release()
        return CycleResult(run.changed, views, finished, run.followed, state_changed)

    # ------------------------------------------------------------------ until they end

    def watch(self, job_ids: list[str], *, once: bool = False, min_interval: float = 0.5, max_interval: float = 30.0,
              on_cycle: Callable[[CycleResult], None] | None = None, until: float | None = None) -> CycleResult:
        """Cycle until every job in *job_ids* has ended (resumes included), or until
        time.monotonic() reaches *until*; returns the last cycle's result.

        Between full polls the monitor sleeps in :meth:`PushWatch.wait_for_wakeup`: the push
        path wakes it for the jobs whose markers or logs changed. While a watcher is alive the
        full poll backs off to *max_interval* unless a state changed; without one, it backs
        off only while nothing changed. A full store (disk) or an unreachable one (a
        PostgreSQL state's server restarting, a network cut) is a pause, not an end: the cycle
        runs again after a wait that doubles up to *max_interval*.
        """
        push = self.push
        interval = pause = min_interval
        woken: dict[str, set[str]] | None = None
        next_full = 0.0
        if not once:
            push.enable()
        try:
            while True:
                full = woken is None
                try:
                    result = self.cycle(job_ids, woken=woken, keep_leases=True)
                except StoreTransientError as exc:
                    # Transient: the cycle's writes were rolled back whole; the same cycle runs again.
                    if until is not None and time.monotonic() >= until:
                        raise
                    pause = min(max(pause * 2, 1.0), max_interval)
                    _warn(f"{exc}; retrying in {pause:.0f} s")
                    time.sleep(pause if until is None else max(0.0, min(pause, until - time.monotonic())))
                    woken = None
                    continue
                pause = min_interval
                if on_cycle is not None:
                    on_cycle(result)
                if once or (job_ids and result.finished >= set(job_ids)):
                    return result
                if not job_ids and not self.context.store.active_attempts():
                    return result
                if until is not None and time.monotonic() >= until:
                    return result
                if full:
                    busy = result.state_changed if push.all_alive() else result.changed
                    interval = push.full_poll_interval(interval, min_interval, max_interval, busy=busy)
                    if result.followed:
                        interval = min(interval, FOLLOW_INTERVAL)
                    next_full = time.monotonic() + interval
                elif push.all_alive():
                    # A wake-up poll asked the scheduler about every job of the cluster: it counts
                    # as the safety net's poll too.
                    next_full = max(next_full, push.last_poll() + interval)
                wait = next_full if until is None else min(next_full, until)
                woken = push.wait_for_wakeup(wait - time.monotonic()) or None
        finally:
            push.close()
            self.leases.release()

    def release_leases(self) -> None:
        """Done with these jobs: another monitor may take them over at once."""
        self.leases.release()


def _warn(message: str) -> None:
    """A warning that cannot go to the store (it is full): straight to the user."""
    print(f"warning: {message}", file=sys.stderr, flush=True)
