"""Sweeps end to end through the real `runjob` command on the local backend, real processes:
a 2x3 grid with one failing element, max_parallel, resume of only the unfinished element,
status / cancel of the sweep, and a rerun after kill -9 that submits no element twice."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from runjob_core.testing import run_cli, wait_until

RUNJOB = str(Path(sys.executable).parent / "runjob")

#: The element's job: N rows with a score from its params; exits 1 for lr 0.3 / seed 2 unless
#: the file 'fixed' exists; counts how many elements run at once (max_parallel).
ELEMENT = r'''
import json, os, pathlib, sys, time
params = json.load(open(os.environ["RUNJOB_PARAMS"]))
shared = pathlib.Path(os.environ["SWEEP_DIR"])
me = shared / "running" / f"{params['lr']}-{params['seed']}"
me.mkdir(parents=True)
with open(shared / "overlap.txt", "a") as out:
    out.write(f"{len(list((shared / 'running').iterdir()))}\n")
gate = shared / "gate"
while gate.exists():
    time.sleep(0.05)
time.sleep(float(os.environ.get("HOLD", "0.3")))
me.rmdir()
if params["lr"] == 0.3 and params["seed"] == 2 and not (shared / "fixed").exists():
    print("element failing on purpose", flush=True)
    sys.exit(1)
results = pathlib.Path(os.environ["RUNJOB_RESULTS"])
results.mkdir(parents=True, exist_ok=True)
with open(results / "results.jsonl", "w") as f:
    for i in range(10):
        score = int((i + params["seed"] + round(params["lr"] * 10)) % 3 == 0)
        row = {"id": i, "response": f"answer {i}", "category": "even" if i % 2 == 0 else "odd", "score": score}
        f.write(json.dumps(row) + "\n")
'''


def runjob(*args, cwd, check=None, timeout=300):
    result = run_cli(*args, cwd=cwd, timeout=timeout)
    if check is not None:
        assert result.returncode == check, (result.stdout, result.stderr)
    return result


def sweep_file(folder: Path, *, max_parallel=2, name="grid", lr=(0.1, 0.3), seed=(1, 2, 3)) -> Path:
    (folder / "element.py").write_text(ELEMENT)
    spec = {"name": name, "command": f"{sys.executable} element.py",
            "env": {"SWEEP_DIR": str(folder / "shared")},
            "sweep": {"params": {"lr": list(lr), "seed": list(seed)}, "max_parallel": max_parallel}}
    (folder / "shared").mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def sweep_status(folder, ref="grid"):
    return json.loads(runjob("status", ref, "--json", cwd=folder, check=0).stdout)


def submitted_attempts(folder) -> list[str]:
    """Every attempt ever submitted, from the activity log (a duplicate shows twice)."""
    events = json.loads(runjob("events", "--json", cwd=folder, check=0).stdout)
    return [f"{e['job_id']}:{e['attempt']}" for e in events if e["kind"] == "submitted"]


def test_grid_with_one_failing_element_then_resume_only_it(runjob_home):
    sweep_file(runjob_home)
    result = runjob("run", "grid.yaml", "--yes", cwd=runjob_home, check=1)
    assert "1 of 6 elements did not complete" in result.stderr
    assert "4 (lr-0.3_seed-2: FAILED" in result.stderr and "runjob resume grid" in result.stderr
    overlap = [int(n) for n in (runjob_home / "shared" / "overlap.txt").read_text().split()]
    assert len(overlap) == 6 and max(overlap) <= 2
    state = sweep_status(runjob_home)
    assert [e["state"] for e in state["elements"]] == ["COMPLETED"] * 4 + ["FAILED", "COMPLETED"]
    assert [e["values"] for e in state["elements"]][4] == {"lr": 0.3, "seed": 2}
    for element in state["elements"]:
        if element["state"] == "COMPLETED":
            rows = (runjob_home / "results" / element["job"] / "results.jsonl").read_text().splitlines()
            assert len(rows) == 10
    before = submitted_attempts(runjob_home)
    assert len(before) == 6
    # One element addressed by index, by values, by name: the same job everywhere a job is taken.
    [one] = json.loads(runjob("status", "grid/4", "--json", cwd=runjob_home, check=0).stdout)
    assert (one["id"], one["state"]) == (state["elements"][4]["job_id"], "FAILED")
    assert "element failing on purpose" in runjob("logs", "grid/lr=0.3,seed=2", cwd=runjob_home, check=0).stdout
    assert json.loads(runjob("report", f"{state['sweep']['id']}/lr-0.3_seed-2", "--json", cwd=runjob_home,
                             check=0).stdout)["job"]["id"] == one["id"]
    shown = runjob("status", "grid", "--no-refresh", cwd=runjob_home, check=0).stdout
    assert "one element: grid/0, grid/lr-0.1_seed-1 or grid/lr=0.1,seed=1" in shown
    unknown = runjob("report", "grid/lr=0.5", cwd=runjob_home, check=1).stderr
    assert "grid/lr=0.5: no element of sweep grid has lr=0.5 (lr takes 0.1, 0.3)" in unknown
    assert "Traceback" not in unknown and len(unknown.strip().splitlines()) == 1

    # The same spec again: nothing is submitted (the failed element waits for resume).
    runjob("run", "grid.yaml", "--yes", cwd=runjob_home, check=1)
    assert submitted_attempts(runjob_home) == before

    (runjob_home / "shared" / "fixed").touch()
    runjob("resume", "grid", "--yes", cwd=runjob_home, check=0)
    after = submitted_attempts(runjob_home)
    failed_job = state["elements"][4]["job_id"]
    assert after[:6] == before and after[6:] == [f"{failed_job}:2"]
    assert all(e["done"] for e in sweep_status(runjob_home)["elements"])
    # Each element is an ordinary job: its own report.
    report = json.loads(runjob("report", "grid-lr-0.3_seed-2", "--json", cwd=runjob_home, check=0).stdout)
    assert report["results"]["rows"] == 10 and len(report["attempts"]) == 2


def test_kill_minus_9_mid_sweep_and_rerun_submits_no_element_twice(runjob_home):
    sweep_file(runjob_home, max_parallel=3)
    gate = runjob_home / "shared" / "gate"
    gate.touch()  # the elements wait here until the first runjob is killed
    env = {**os.environ, "COLUMNS": "200"}
    first = subprocess.Popen([RUNJOB, "run", "grid.yaml", "--yes"], cwd=runjob_home, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    running = runjob_home / "shared" / "running"
    wait_until(lambda: running.is_dir() and len(list(running.iterdir())) == 3, timeout=120, what="3 elements running")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    gate.unlink()
    runjob("run", "grid.yaml", "--yes", cwd=runjob_home, check=1)  # element 4 fails, as designed
    attempts = submitted_attempts(runjob_home)
    assert len(attempts) == len(set(attempts)) == 6
    jobs = [e["job_id"] for e in sweep_status(runjob_home)["elements"]]
    assert len(set(jobs)) == 6
    overlap = [int(n) for n in (runjob_home / "shared" / "overlap.txt").read_text().split()]
    assert max(overlap) <= 3


def test_cancel_sweep_stops_active_elements_and_starts_no_more(runjob_home):
    sweep_file(runjob_home, max_parallel=2)
    (runjob_home / "shared" / "gate").touch()
    out = json.loads(runjob("submit", "grid.yaml", "--yes", "--json", cwd=runjob_home, check=0).stdout)
    assert [e["state"] != "NOT_SUBMITTED" for e in out["elements"]] == [True, True, False, False, False, False]
    running = runjob_home / "shared" / "running"
    wait_until(lambda: running.is_dir() and len(list(running.iterdir())) == 2, timeout=120, what="2 elements running")
    runjob("cancel", "grid/1", cwd=runjob_home, check=0)  # one element: the other goes on, the sweep too
    state = sweep_status(runjob_home, out["sweep_id"])
    assert state["sweep"]["state"] == "active"
    assert [e["state"] for e in state["elements"]][:2] == ["RUNNING", "CANCELLED"]
    runjob("cancel", "grid", cwd=runjob_home, check=0)
    state = sweep_status(runjob_home, out["sweep_id"])
    assert state["sweep"]["state"] == "cancelled"
    assert [e["state"] for e in state["elements"]] == ["CANCELLED"] * 2 + ["NOT_SUBMITTED"] * 4
    # A run of a cancelled sweep's spec starts it again; resume would too. Here: the sweep stays cancelled.
    assert len(submitted_attempts(runjob_home)) == 2


def test_resume_of_one_never_submitted_element_starts_only_it(runjob_home):
    sweep_file(runjob_home, max_parallel=2)
    out = json.loads(runjob("submit", "grid.yaml", "--yes", "--json", cwd=runjob_home, check=0).stdout)
    assert [e["state"] == "NOT_SUBMITTED" for e in out["elements"]] == [False, False, True, True, True, True]
    said = runjob("status", "grid/3", cwd=runjob_home, check=1).stderr
    assert "has not been submitted yet" in said and "`runjob resume grid/3` starts it" in said
    runjob("resume", "grid/3", "--yes", cwd=runjob_home, check=0)
    state = sweep_status(runjob_home, out["sweep_id"])
    assert [e["state"] for e in state["elements"]] == ["COMPLETED"] * 2 + ["NOT_SUBMITTED", "COMPLETED"] + ["NOT_SUBMITTED"] * 2
    rows = (runjob_home / "results" / state["elements"][3]["job"] / "results.jsonl").read_text().splitlines()
    assert len(rows) == 10
    assert len(submitted_attempts(runjob_home)) == 3
    # Again: it is a completed job now, resumed as any job is (nothing to do).
    assert "completed; there is nothing to resume" in runjob("resume", "grid/3", "--yes", cwd=runjob_home, check=1).stderr


def test_bad_sweep_key_is_one_line_naming_the_key_path(runjob_home):
    path = sweep_file(runjob_home)
    spec = yaml.safe_load(path.read_text())
    spec["sweep"]["params"]["model.nmae"] = ["a", "b"]
    path.write_text(yaml.safe_dump(spec))
    result = runjob("plan", "grid.yaml", cwd=runjob_home, check=1)
    assert "grid.yaml: sweep.params.model.nmae: model has no field 'nmae'" in result.stderr
    assert "Traceback" not in result.stderr
    # A single-job command given a sweep says what takes it.
    assert "is a sweep" in runjob("render", "grid.yaml", cwd=runjob_home, check=1).stderr


def test_plan_shows_the_element_table_and_one_preflight_per_shape(runjob_home):
    sweep_file(runjob_home)
    plan = json.loads(runjob("plan", "grid.yaml", "--json", cwd=runjob_home, check=0).stdout)
    assert len(plan["elements"]) == 6 and len(plan["shapes"]) == 1 and plan["shapes"][0]["elements"] == list(range(6))
    assert plan["varying"] == ["lr", "seed"] and plan["max_parallel"] == 2
    assert len({e["spec_hash"] for e in plan["elements"]}) == 6


def _wilson(k, n, z=1.959963984540054):
    # Written out again here (not imported): the report's interval is checked against it.
    p = k / n
    denominator = 1 + z * z / n
    centre = p + z * z / (2 * n)
    spread = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator)


def test_combined_report_numbers_match_the_elements_results_files(runjob_home):
    import statistics

    sweep_file(runjob_home, max_parallel=3)
    (runjob_home / "shared" / "fixed").touch()
    runjob("run", "grid.yaml", "--yes", cwd=runjob_home, check=0)
    report = json.loads(runjob("report", "grid", "--json", cwd=runjob_home, check=0).stdout)
    assert report["sweep"]["varying"] == ["lr", "seed"] and report["sweep"]["done"] == 6
    means, by_category = {}, {}
    for element in report["elements"]:
        rows = [json.loads(line) for line in (runjob_home / "results" / element["job"] / "results.jsonl").read_text().splitlines()]
        scores = [r["score"] for r in rows]
        assert element["rows"] == len(rows) == 10 and element["state"] == "COMPLETED"
        assert element["score"]["mean"] == statistics.fmean(scores)
        assert element["score"]["median"] == statistics.median(scores)
        assert element["score"]["method"] == "wilson"
        low, high = _wilson(sum(scores), len(scores))
        assert abs(element["score"]["ci_low"] - low) < 1e-12 and abs(element["score"]["ci_high"] - high) < 1e-12
        assert element["gpu_hours"] == 0 and element["cost_usd"] is None  # no GPU, no price
        means[(element["values"]["lr"], element["values"]["seed"])] = element["score"]["mean"]
        for category in ("even", "odd"):
            by_category.setdefault(category, {})[element["name"]] = statistics.fmean(
                r["score"] for r in rows if r["category"] == category)
    ranked = sorted(report["elements"], key=lambda e: e["score"]["mean"], reverse=True)
    best = report["best"]
    assert best["mean"] == ranked[0]["score"]["mean"] and best["next"]["mean"] == ranked[1]["score"]["mean"]
    assert best["margin"] == ranked[0]["score"]["mean"] - ranked[1]["score"]["mean"]
    assert best["overlap"] == (ranked[0]["score"]["ci_low"] <= ranked[1]["score"]["ci_high"])
    pivot = report["pivot"]
    assert (pivot["rows"], pivot["columns"], pivot["row_values"], pivot["column_values"]) == ("lr", "seed", [0.1, 0.3], [1, 2, 3])
    assert pivot["mean"] == [[means[(lr, seed)] for seed in (1, 2, 3)] for lr in (0.1, 0.3)]
    assert report["categories"] == by_category
    markdown = runjob("report", "grid", "--md", cwd=runjob_home, check=0).stdout
    assert "| # | element | values |" in markdown and "## Mean score by lr and seed" in markdown
    assert f"best: {best['name']}" in markdown
    assert "best:" in runjob("report", "grid", cwd=runjob_home, check=0).stdout


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    from runjob_core.sweep._report import score_stats

    values = [0.2, 0.9, 0.4, 0.75, 0.1, 0.6, 0.33, 0.8]
    first, again = score_stats(values), score_stats(list(values))
    assert first == again and first["method"] == "bootstrap"
    assert min(values) <= first["ci_low"] < first["mean"] < first["ci_high"] <= max(values)


def test_two_concurrent_runs_of_one_sweep_submit_each_element_once(runjob_home):
    sweep_file(runjob_home, max_parallel=2)
    (runjob_home / "shared" / "fixed").touch()
    env = {**os.environ, "COLUMNS": "200"}
    runs = [subprocess.Popen([RUNJOB, "run", "grid.yaml", "--yes"], cwd=runjob_home, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    attempts = submitted_attempts(runjob_home)
    assert len(attempts) == len(set(attempts)) == 6
    sweeps = set(re.findall(r"sweep grid \((sw-[0-9a-z]+),", outputs[0][0] + outputs[1][0]))
    assert len(sweeps) == 1  # one sweep record, followed by both
    overlap = [int(n) for n in (runjob_home / "shared" / "overlap.txt").read_text().split()]
    assert max(overlap) <= 2  # the two drivers together stay under max_parallel


def test_canary_go_queues_the_sweep_and_no_go_queues_nothing(runjob_home):
    sweep_file(runjob_home, lr=(0.3, 0.1), seed=(2, 1))  # element 0 is lr 0.3 / seed 2: it fails until 'fixed'
    result = runjob("run", "grid.yaml", "--yes", "--canary", cwd=runjob_home, check=1)
    assert "canary NO-GO" in result.stderr and "the sweep was not queued" in result.stderr
    jobs = json.loads(runjob("status", "--json", cwd=runjob_home, check=0).stdout)
    assert [(j["name"], j["kind"]) for j in jobs] == [("grid-lr-0.3_seed-2", "canary")]
    assert "no job with id or name 'grid'" in runjob("status", "grid", cwd=runjob_home, check=1).stderr

    (runjob_home / "shared" / "fixed").touch()
    result = runjob("run", "grid.yaml", "--yes", "--canary", cwd=runjob_home, check=0)
    assert "canary GO" in result.stderr
    events = json.loads(runjob("events", "--json", cwd=runjob_home, check=0).stdout)
    kinds = {j["id"]: j["kind"] for j in json.loads(runjob("status", "--json", "-n", "50", cwd=runjob_home, check=0).stdout)}
    submitted = [kinds[e["job_id"]] for e in events if e["kind"] == "submitted"]
    assert submitted == ["canary", "canary"] + ["full"] * 4  # the GO canary before any element
