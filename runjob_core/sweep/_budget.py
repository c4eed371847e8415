"""A budget a sweep's elements share on one cluster (RunPod's ``max_usd_total``).

A backend that rents machines answers pre-flight with what one attempt may cost at most
(``Estimate.data["usd_max_total"]``: the dearest affordable price times the time limit) and
the budget of its cluster (``data["usd_budget_total"]``). An element is started only while
what the sweep's elements on that cluster have committed, plus its own reservation, stays
within the budget. An element *commits* what its job has cost so far (:func:`spent`) and,
while it is active, its reservation on top: reserved when it starts, released when it ends
(its real cost stays). The running attempt's cost so far is in both while it runs, which
errs on the side of the budget. An element that does not fit waits while another element on
its cluster is active (one ending may free enough); with none active it can never fit, and is
reported as not started.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Budget:
    #: Cluster name -> USD the sweep's elements there may commit together.
    limits: dict[str, float] = attrs.field(factory=dict)
    #: Element index -> USD one attempt of it may cost at most.
    reserve: dict[int, float] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return bool(self.limits)


def from_checks(sweep, checks) -> Budget:
    """The budgets and reservations pre-flight's estimates gave, per resource shape."""
    limits: dict[str, float] = {}
    reserve: dict[int, float] = {}
    for check in checks:
        cluster = sweep.jobs[check.indices[0]].cluster
        for estimate in check.preflight.estimates:
            budget, most = estimate.data.get("usd_budget_total"), estimate.data.get("usd_max_total")
            if _number(budget):
                limits[cluster] = min(float(budget), limits.get(cluster, float("inf")))
            if _number(most):
                reserve.update({i: max(float(most), reserve.get(i, 0.0)) for i in check.indices})
    return Budget(limits, reserve)


def blocked(context, sweep, budget: Budget, jobs: dict[int, Any], active: set[int], index: int) -> tuple[str, bool] | None:
    """Why element *index* may not start now, and whether waiting may help (another element on
    its cluster is active); None when it fits in its cluster's budget (or there is none)."""
    cluster = sweep.jobs[index].cluster
    limit = budget.limits.get(cluster)
    if limit is None:
        return None
    on_cluster = [i for i in range(len(sweep.jobs)) if sweep.jobs[i].cluster == cluster]
    committed = 0.0
    for i in on_cluster:
        job = jobs.get(i)
        if job is not None:
            committed += spent(context.store, job.id)
        if i in active:
            committed += budget.reserve.get(i, 0.0)
    own = budget.reserve.get(index, 0.0)
    if committed + own <= limit + 1e-9:
        return None
    waiting = any(i in active for i in on_cluster)
    return (f"cluster {cluster}'s budget: ${committed:.2f} committed by this sweep's elements there + ${own:.2f} "
            f"reserved for this one is over max_usd_total ${limit:g}", waiting)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def spent(store, job_id: str, now: float | None = None) -> float:
    """What the machines of a job's attempts cost: each attempt's billed figure (a ``cost``
    artifact) once the backend gave it, else its machine's price per hour
    (``Machine.data["usd_per_hour"]``) from its submission to its release or end (or now)
    -- the rule of ``runjob status``'s cost column. Attempts without a priced machine cost 0."""
    import time

    now = time.time() if now is None else now
    billed = {a.attempt: a.data.get("usd") for a in store.artifacts(job_id) if a.kind == "cost"}
    total = 0.0
    for attempt in store.attempts(job_id):
        if _number(billed.get(attempt.n)):
            total += float(billed[attempt.n])
            continue
        machine = attempt.machine
        price = machine.data.get("usd_per_hour") if machine is not None else None
        if _number(price) and attempt.submitted_at:
            end = attempt.released_at or attempt.ended_at or now
            total += float(price) * max(0.0, end - attempt.submitted_at) / 3600
    return total
