"""Which process observes which job: the ``observe:<job id>`` leases of one monitor.

One writer per job: the monitor that follows a job holds its lease (runjob_core.store.leases)
and records what it learns; every other process watching the job shows what the store says.
``watch`` leases every job it follows up front and keeps them between cycles; a one-shot
cycle (``runjob status``) leases a job only when it has something to record, so an
unchanged ``runjob status`` writes nothing at all.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs

from runjob_core.models import PENDING
from runjob_core.store.faults import StoreError

if TYPE_CHECKING:
    from runjob_core.store import AttemptRow, Store

#: The one monitor that follows a job holds ``observe:<job id>`` for this long, renewed every
#: cycle; the other processes watching it show what the store says.
OBSERVE_LEASE_SECONDS = 120.0

#: {cluster: (attempts, their Submissions)}, as :meth:`CycleMemo.groups` returns them.
Groups = dict[str, tuple[list, list]]


def key_of(job_id: str) -> str:
    return f"observe:{job_id}"


@attrs.define
class ObserveLeases:
    """The observe leases one monitor holds, and when each is next renewed."""

    store: Store
    #: Lease key -> time.time() after which it is renewed (at half its life, not every cycle).
    renew_at: dict[str, float] = attrs.field(factory=dict)

    def hold(self, grouped: Groups) -> tuple[Groups, set[str]]:
        """The cluster groups without the jobs another process observes (those are only
        shown), every other job leased to this one.

        Leases are taken in one transaction per cycle, and one this process already holds is
        renewed at half its life, not every cycle: at thousands of followed jobs a commit per
        job per cycle would cost more than the poll."""
        now = time.time()
        wanted = [f"observe:{a.job_id}" for group, _ in grouped.values() for a in group]  # key_of, inlined: every job, every cycle
        held = set(self.store.held_leases("observe:"))
        due = [key for key in wanted if not (key in held and now < self.renew_at.get(key, 0.0))]
        others = self.store.try_leases(due, ttl=OBSERVE_LEASE_SECONDS)
        for key in due:
            if key not in others:
                self.renew_at[key] = now + OBSERVE_LEASE_SECONDS / 2
        if not others:
            return grouped, set()  # the usual case: the memo's lists, as they were
        return _without(grouped, {key.split(":", 1)[1] for key in others})

    def held_elsewhere(self, grouped: Groups) -> tuple[Groups, set[str]]:
        """The cluster groups without the jobs another live process observes, read without a
        write: a one-shot cycle takes no lease up front (:meth:`to_record`)."""
        wanted = [f"observe:{a.job_id}" for group, _ in grouped.values() for a in group]  # key_of, inlined: every job, every cycle
        others = self.store.lease_holders(wanted)
        if not others:
            return grouped, set()
        return _without(grouped, {key.split(":", 1)[1] for key in others})

    def to_record(self, to_observe: list, followed: set[str]) -> list:
        """Of the jobs a one-shot cycle is about to observe, those with something to record
        are leased in one transaction (one writer per job); one that another process took
        meanwhile is left to it (shown, not written, and added to *followed*). A job still
        queued as the store has it records nothing, so it needs no lease."""
        keys = [key_of(attempt.job_id) for attempt, _sub, status, _causes in to_observe
                if not _still_queued(attempt, status)]
        others = self.store.try_leases(keys, ttl=OBSERVE_LEASE_SECONDS) if keys else {}
        if not others:
            return to_observe
        taken_by_others = {key.split(":", 1)[1] for key in others}
        followed.update(taken_by_others)
        return [item for item in to_observe if item[0].job_id not in taken_by_others]

    def take(self, job_id: str) -> bool:
        """Lease one job (a follow-up left by a monitor that died); False if another process holds it."""
        return self.store.try_lease(key_of(job_id), ttl=OBSERVE_LEASE_SECONDS) is None

    def holder(self, job_id: str) -> str | None:
        return self.store.lease_holder(key_of(job_id))

    def release(self) -> None:
        """Done with these jobs: another monitor may take them over at once."""
        keys = self.store.held_leases("observe:")
        if not keys:
            return
        try:
            self.store.release_leases(keys)
        except StoreError:
            pass  # a full or read-only store: the leases free themselves when this process ends
        self.renew_at.clear()


def _still_queued(attempt: AttemptRow, status) -> bool:
    """The poll says what the store says of a job waiting in the queue: the observation
    writes nothing for it."""
    return status.state == PENDING and attempt.state == PENDING and (status.reason or None) == (attempt.reason or None)


def _without(grouped: Groups, job_ids: set[str]) -> tuple[Groups, set[str]]:
    by_cluster = {}
    for cluster_name, (group, submissions) in grouped.items():
        keep = [(a, s) for a, s in zip(group, submissions) if a.job_id not in job_ids]
        if keep:
            by_cluster[cluster_name] = ([a for a, _ in keep], [s for _, s in keep])
    return by_cluster, job_ids
