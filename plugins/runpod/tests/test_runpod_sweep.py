"""A sweep on the fake RunPod (real HTTP, real sshd pods): elements on separate pods at once, the
cluster's max_usd_total shared by the whole sweep (each active element reserves its worst case:
$2.69/h x 6 h = $16.14), and capacity fallback per element."""

from __future__ import annotations

from pathlib import Path

from runjob_core import lifecycle
from runjob_core.sweep import _budget, _run, sweep_from_mapping
from runjob_core.testing import write_clusters_yaml
from runjob_runpod.testing import cluster_config as runpod_cluster


def _sweep(home: Path, gate: Path):
    spec = {"name": "podsweep", "cluster": "pods", "resources": {"gpus": 1, "time": "6h"},
            # At least a second of work once the gate opens: the report rounds GPU-hours to 4
            # places, so an element done in under 0.18 s would show 0.0 and fail the check below.
            "command": f'while [ ! -e {gate} ]; do sleep 0.1; done; sleep 1; echo "element $RUNJOB_TAG"',
            "sweep": {"params": {"x": [1, 2, 3]}}}
    return sweep_from_mapping(spec, source=str(home / "podsweep.yaml"), base_dir=str(home))


def _windows(context, row):
    """(submitted, ended) of each element's one attempt, by element index."""
    jobs = _run.element_jobs(context.store, row.id)
    out = {}
    for index, job in jobs.items():
        (attempt,) = context.store.attempts(job.id)
        out[index] = (attempt.submitted_at, attempt.ended_at, attempt.state)
    return out


def _drive_with_gate(context, sweep, gate: Path, *, open_when_running: int):
    row = _run.record(context, sweep)
    checks = _run.preflight(context, sweep)

    def on_cycle(table):
        if sum(e["state"] == "RUNNING" for e in table) >= open_when_running:
            gate.touch()  # the first elements ran side by side; now let them end

    return row, _run.drive(context, sweep, row, checks=checks, interval=0.3, on_cycle=on_cycle)


def test_elements_share_the_cluster_budget_on_separate_pods(runjob_home, fake_runpod, pod_key):
    # $40 holds two reservations of $16.14, not three: the third element starts when one ends.
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [runpod_cluster(fake_runpod, pod_key, max_usd_total=40.0)])
    fake_runpod.capacity["NVIDIA H100 80GB HBM3"] = 1  # one H100 left: the others fall back to the A100
    gate = runjob_home / "gate"
    context = lifecycle.open_context()
    try:
        sweep = _sweep(runjob_home, gate)
        budget = _budget.from_checks(sweep, _run.preflight(context, sweep))
        assert budget.limits == {"pods": 40.0} and budget.reserve == {0: 16.14, 1: 16.14, 2: 16.14}
        row, driven = _drive_with_gate(context, sweep, gate, open_when_running=2)
        assert [e["state"] for e in driven.elements] == ["COMPLETED"] * 3 and not driven.not_started
        from runjob_core.sweep import _report

        combined = _report.build(context.store, row, clusters=context.clusters)
        assert all(e["cost_usd"] is not None and e["gpu_hours"] > 0 for e in combined["elements"])
        assert combined["sweep"]["cost_usd"] is not None
        windows = _windows(context, row)
        first_end = min(windows[0][1], windows[1][1])
        assert windows[1][0] < windows[0][1]  # the first two ran at once, each on its own pod
        assert windows[2][0] >= first_end  # the third waited for the budget, not for max_parallel
    finally:
        context.close()
    pods = sorted(fake_runpod.gone.values(), key=lambda p: p.id)
    assert len(pods) == 3 and fake_runpod.live_pods() == []
    assert [p.gpu["id"] for p in pods] == ["NVIDIA H100 80GB HBM3"] + ["NVIDIA A100 80GB PCIe"] * 2


def test_elements_that_can_never_fit_what_is_left_of_the_budget_are_not_started(runjob_home, fake_runpod, pod_key):
    # 8 x H100 at $2.69/h for 1 h: $21.52 reserved, the whole budget. The first element runs
    # alone; what it really cost (a cent or two) stays spent, so no other element fits again.
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [runpod_cluster(fake_runpod, pod_key, max_usd_total=21.52, max_usd_per_hour=30.0)])
    gate = runjob_home / "gate"
    gate.touch()
    context = lifecycle.open_context()
    try:
        spec = _sweep(runjob_home, gate).spec
        spec = {**spec, "resources": {"gpus": 8, "time": "1h"}, "command": "sleep 3; echo element"}
        sweep = sweep_from_mapping(spec, source=str(runjob_home / "podsweep.yaml"), base_dir=str(runjob_home))
        row, driven = _drive_with_gate(context, sweep, gate, open_when_running=1)
        assert [e["state"] for e in driven.elements] == ["COMPLETED", "NOT_SUBMITTED", "NOT_SUBMITTED"]
        assert sorted(driven.not_started) == [1, 2]
        assert all("over max_usd_total $21.52" in why and "$21.52 reserved for this one" in why
                   for why in driven.not_started.values())
        events = context.store.events(None, kinds=("sweep_element_failed",))
        assert len(events) == 2 and all("cluster pods's budget" in e.message for e in events)
    finally:
        context.close()
    assert len(fake_runpod.gone) == 1 and fake_runpod.live_pods() == []
