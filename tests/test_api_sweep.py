"""Session.sweep: a sweep from the Python API, its elements as typed handles that every job
method takes (status, wait, report, resume), on the local backend with real processes."""

from __future__ import annotations

import json
import sys

import pytest

from runjob_core import api

#: Writes 4 rows with a 0/1 score; counts the elements running at once; exits 1 for lr 0.3 /
#: seed 2 unless the file 'fixed' exists.
ELEMENT = r'''
import json, os, pathlib, sys, time
params = json.load(open(os.environ["RUNJOB_PARAMS"]))
running = pathlib.Path("running")
running.mkdir(exist_ok=True)
me = running / f"{params['lr']}-{params['seed']}"
me.mkdir()
with open("overlap.txt", "a") as out:
    out.write(f"{len(list(running.iterdir()))}\n")
time.sleep(0.3)
me.rmdir()
if params["lr"] == 0.3 and params["seed"] == 2 and not pathlib.Path("fixed").exists():
    sys.exit(1)
results = pathlib.Path(os.environ["RUNJOB_RESULTS"])
results.mkdir(parents=True, exist_ok=True)
with open(results / "results.jsonl", "w") as f:
    for i in range(4):
        f.write(json.dumps({"id": i, "response": "r", "score": int(i < params["seed"] + round(params["lr"] * 10))}) + "\n")
'''


def spec(max_parallel=1):
    return {"name": "libgrid", "command": f"{sys.executable} element.py",
            "sweep": {"params": {"lr": [0.1, 0.3], "seed": [1, 2]}, "max_parallel": max_parallel}}


def submitted(rj) -> list[str]:
    return [f"{e.job_id}:{e.attempt}" for e in rj._context.store.events(None, kinds=("submitted",))]


def test_session_sweep_gives_element_handles_that_behave_like_jobs(runjob_home):
    (runjob_home / "element.py").write_text(ELEMENT)
    with api.open() as rj:
        grid = rj.sweep(spec(), base_dir=runjob_home)
        assert isinstance(grid, api.SweepRef) and grid.varying == ("lr", "seed") and grid.max_parallel == 1
        assert [(e.index, e.name, e.job, e.values) for e in grid.elements] == [
            (0, "lr-0.1_seed-1", "libgrid-lr-0.1_seed-1", {"lr": 0.1, "seed": 1}),
            (1, "lr-0.1_seed-2", "libgrid-lr-0.1_seed-2", {"lr": 0.1, "seed": 2}),
            (2, "lr-0.3_seed-1", "libgrid-lr-0.3_seed-1", {"lr": 0.3, "seed": 1}),
            (3, "lr-0.3_seed-2", "libgrid-lr-0.3_seed-2", {"lr": 0.3, "seed": 2})]
        first = [rj.status(e) for e in grid.elements]
        assert first[0].state != api.NOT_SUBMITTED and first[0].name == "libgrid-lr-0.1_seed-1"
        assert [s.state for s in first[1:]] == [api.NOT_SUBMITTED] * 3 and not any(s.done for s in first[1:])
        with pytest.raises(api.JobNotFoundError, match="has not been submitted yet"):
            rj.report(grid.elements[3])

        final = rj.wait(grid.elements)
        assert [s.state for s in final] == ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"]
        assert all(s.done for s in final) and [s.ok for s in final] == [True, True, True, False]
        overlap = [int(n) for n in (runjob_home / "overlap.txt").read_text().split()]
        assert len(overlap) == 4 and max(overlap) == 1  # max_parallel 1: one at a time
        assert len(submitted(rj)) == 4

        # Each handle is a job handle: report, by index or by values; and the CLI's reference.
        best = grid.element(lr=0.3, seed=1)
        report = rj.report(best)
        assert report["job"]["name"] == "libgrid-lr-0.3_seed-1" and report["results"]["rows"] == 4
        assert rj.status(f"{grid.name}/lr=0.3,seed=1").id == report["job"]["id"] == rj.status(best.ref).id
        combined = rj.sweep_report(grid)
        for element in combined["elements"][:3]:
            rows = [json.loads(line) for line in
                    (runjob_home / "results" / element["job"] / "results.jsonl").read_text().splitlines()]
            assert element["rows"] == 4 and element["score"]["mean"] == sum(r["score"] for r in rows) / 4
        assert combined["elements"][3]["state"] == "FAILED" and combined["best"]["name"] == "lr-0.3_seed-1"

        # The same spec again is the same sweep: nothing submitted twice.
        again = rj.sweep(spec(), base_dir=runjob_home)
        assert again.id == grid.id and len(submitted(rj)) == 4

        # The failed element resumed through its handle, followed alone.
        (runjob_home / "fixed").touch()
        failed = grid.element(3)
        rj.resume(failed)
        [state] = rj.wait([failed])
        assert state.ok and state.attempts == 2 and len(submitted(rj)) == 5
        assert rj.sweep_report(grid.name)["sweep"]["done"] == 4


def test_session_sweep_refuses_like_the_cli_and_runs_the_rest_when_asked(runjob_home):
    (runjob_home / "element.py").write_text(ELEMENT)
    (runjob_home / "fixed").touch()
    data = spec(max_parallel=2)  # 1,000 samples at 1 a second: a 1-minute limit cannot hold them, an hour can
    data["params"] = {"throughput_per_s": 1, "num_samples": 1000, "lr": 0.1, "seed": 1}
    data["resume"] = {"auto": False}
    data["sweep"]["params"] = {"resources.time": ["1h", "1m"]}
    with api.open() as rj:
        with pytest.raises(api.RefusedError, match=r"refused 1 of 2 elements of sweep libgrid: 1 \(time-1m\)"):
            rj.sweep(data, base_dir=runjob_home)
        assert rj.jobs() == []
        grid = rj.sweep(data, base_dir=runjob_home, skip_refused=True)
        refused = grid.element(**{"resources.time": "1m"})
        assert refused.refused and not grid.element(0).refused
        final = rj.wait(grid.elements, timeout=300)
        assert final[0].ok and final[1].state == api.NOT_SUBMITTED and "refused by pre-flight" in final[1].outcome
