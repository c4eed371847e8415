"""What a :class:`~runjob_core.monitor.Monitor` remembers from one cycle to the next, as
typed attributes (the Monitor adds what it does with them). Here, below the cycle, so that
the modules the cycle calls (:mod:`.observe`, :mod:`.endings`) can name it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from runjob_core.models import JobSpec, JobStatus, Submission
from runjob_core.monitor import memo as _memo
from runjob_core.monitor import push as _push
from runjob_core.monitor.leases import ObserveLeases
from runjob_core.reporting.history import HistoryCursor
from runjob_core.store import AttemptRow

if TYPE_CHECKING:
    from runjob_core.context import RunContext


@attrs.define(eq=False)
class MonitorState:
    """Everything one monitor keeps between cycles. Killed and restarted, a monitor carries
    on from the store: this only spares work (re-reading, re-parsing, re-leasing)."""

    context: RunContext
    #: The store's active attempts and how each was last seen (an unchanged job costs nothing).
    memo: _memo.CycleMemo = attrs.field(factory=_memo.CycleMemo)
    #: The ``observe:<job id>`` leases this monitor holds (one writer per job).
    leases: ObserveLeases = attrs.field(default=attrs.Factory(lambda self: ObserveLeases(self.context.store), takes_self=True))
    #: The push path: each cluster's watcher, and what its wake-ups need.
    push: _push.PushWatch = attrs.field(default=attrs.Factory(lambda self: _push.PushWatch(self.context), takes_self=True))
    #: Job id -> its spec, parsed once (the spec never changes once submitted: its hash is the job's identity).
    specs: dict[str, JobSpec] = attrs.field(factory=dict)
    #: (job id, attempt, backend job id) -> its Submission, parsed once.
    submissions: dict[tuple[str, int, str | None], Submission] = attrs.field(factory=dict)
    #: What was read of each job's metrics history and log metrics.
    history: HistoryCursor = attrs.field(factory=HistoryCursor)
    #: (job id, attempt, plugin) of health checkers whose failure was recorded (once per attempt).
    health_errors: set[tuple[str, int, str]] = attrs.field(factory=set)
    #: (job id, attempt) -> the backend's last answer about an attempt runjob asked to cancel
    #: (read by :mod:`runjob_core._cancel` for its message when the end is not confirmed).
    cancel_polls: dict[tuple[str, int], JobStatus] = attrs.field(factory=dict)

    def submission(self, attempt: AttemptRow) -> Submission:
        key = (attempt.job_id, attempt.n, attempt.backend_job_id)
        found = self.submissions.get(key)
        if found is None:
            found = self.submissions[key] = attempt.submission
        return found

    def spec(self, job_id: str) -> JobSpec:
        found = self.specs.get(job_id)
        if found is None:
            found = self.specs[job_id] = self.context.store.get_job(job_id).spec
        return found
