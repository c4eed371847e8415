"""A sweep on the real SLURM test cluster: its elements go out as one job array
(``sbatch --array=0-N%K``), each element still its own runjob job.

The element is a small Python script run by the node's python3: it counts how many elements
run at once (in a folder on the cluster's scratch), waits while a gate file exists, fails for
lr 0.3 / seed 2 unless a 'fixed' file exists, and writes 5 rows.
"""

import json
import shlex
import time
import uuid

import pytest

from runjob_core import lifecycle
from runjob_core.sweep import _array, _run, sweep_from_mapping
from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm

ELEMENT = r'''
import json, os, pathlib, sys, time
params = json.load(open(os.environ["RUNJOB_PARAMS"]))
shared = pathlib.Path(os.environ["SWEEP_DIR"])
me = shared / "running" / f"{params['lr']}-{params['seed']}"
me.mkdir(parents=True)
with open(shared / "overlap.txt", "a") as out:
    out.write(f"{len(list((shared / 'running').iterdir()))}\n")
while (shared / "gate").exists():
    time.sleep(0.2)
time.sleep(1)
me.rmdir()
if params["lr"] == 0.3 and params["seed"] == 2 and not (shared / "fixed").exists():
    sys.exit(1)
results = pathlib.Path(os.environ["RUNJOB_RESULTS"])
results.mkdir(parents=True, exist_ok=True)
with open(results / "rows.jsonl", "w") as f:
    for i in range(5):
        f.write(json.dumps({"id": i, "response": "x", "score": (i + params["seed"]) % 2}) + "\n")
'''


@pytest.fixture
def ctx(runjob_home, slurm_env):
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    (runjob_home / "project").mkdir()
    (runjob_home / "project" / "element.py").write_text(ELEMENT)
    context = lifecycle.open_context()
    yield context
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


@pytest.fixture
def shared(ctx):
    """A folder on the cluster's scratch the elements share (the overlap count, the gate)."""
    folder = f"{ctx.clusters['under-test'].scratch_path}/sweep-{uuid.uuid4().hex[:8]}"
    yield folder
    remote(ctx, f"rm -rf {shlex.quote(folder)}")


def make_sweep(shared, runjob_home, *, max_parallel=2, name="arr"):
    spec = {"name": name, "command": "python3 element.py", "cluster": "under-test", "workdir": "project",
            "env": {"SWEEP_DIR": shared},
            "sweep": {"params": {"lr": [0.1, 0.3], "seed": [1, 2, 3]}, "max_parallel": max_parallel}}
    return sweep_from_mapping(spec, source=str(runjob_home / f"{name}.yaml"), base_dir=str(runjob_home))


def remote(ctx, command: str):
    return ctx.transport(ctx.clusters["under-test"]).run(["bash", "-c", command])


def ids_of(ctx, row):
    return [ctx.store.latest_attempt(job.id).backend_job_id for job in _run.element_jobs(ctx.store, row.id).values()]


def test_grid_goes_out_as_one_array_bounded_by_max_parallel(ctx, shared, runjob_home):
    sweep = make_sweep(shared, runjob_home)
    row = _run.record(ctx, sweep)
    driven = _run.drive(ctx, sweep, row, checks=[], interval=1.0)
    ids = ids_of(ctx, row)
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(6)]  # one array, task i = element i
    # sacct of the array's id lists its 6 tasks, one array job id for all (22.05 has no ArrayJobID field).
    accounted = remote(ctx, f"sacct -n -X -P -o JobID -j {array}").stdout.split()
    assert sorted(accounted) == sorted(f"{array}_{i}" for i in range(6))
    overlap = [int(n) for n in remote(ctx, f"cat {shlex.quote(shared)}/overlap.txt").stdout.split()]
    assert len(overlap) == 6 and max(overlap) <= 2  # %2: never more than 2 tasks running
    states = [e["state"] for e in driven.elements]
    assert states == ["COMPLETED"] * 4 + ["FAILED", "COMPLETED"]
    assert all(e["done"] for e in driven.elements if e["index"] != 4)
    for element in driven.elements:
        if element["done"]:
            rows = (runjob_home / "results" / element["job"] / "rows.jsonl").read_text().splitlines()
            assert len(rows) == 5

    # The failed element alone is resubmitted: its own sbatch, not the array again.
    remote(ctx, f"touch {shlex.quote(shared)}/fixed")
    driven = _run.drive(ctx, sweep, row, checks=[], restart_ended=True, interval=1.0)
    assert all(e["done"] for e in driven.elements)
    failed = _run.element_jobs(ctx.store, row.id)[4]
    attempts = ctx.store.attempts(failed.id)
    assert [a.n for a in attempts] == [1, 2] and "_" not in attempts[1].backend_job_id
    assert ids_of(ctx, row)[:4] == [f"{array}_{i}" for i in range(4)]


def test_cancel_of_one_element_cancels_one_task(ctx, shared, runjob_home):
    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/gate")
    sweep = make_sweep(shared, runjob_home, max_parallel=3, name="gated")
    row = _run.record(ctx, sweep)
    _run.start(ctx, sweep, row, limit=3)
    jobs = _run.element_jobs(ctx.store, row.id)
    assert len(jobs) == 6
    wait_until(lambda: remote(ctx, f"ls {shlex.quote(shared)}/running").stdout.split().__len__() == 3, timeout=120,
               what="3 tasks running at the gate")
    lifecycle.cancel(ctx, jobs[1])  # running: its task alone is cancelled
    lifecycle.cancel(ctx, jobs[5])  # pending behind %3: SLURM keeps no record of it; runjob's marker says CANCELLED
    assert ctx.store.latest_attempt(jobs[1].id).state == "CANCELLED"
    assert ctx.store.latest_attempt(jobs[5].id).state == "CANCELLED"
    ids = ids_of(ctx, row)
    listed = remote(ctx, f"squeue -h -r -o '%i' -j {ids[0].split('_')[0]}").stdout.split()
    assert set(listed) == set(ids) - {ids[1], ids[5]}  # the other four tasks go on
    remote(ctx, f"rm -f {shlex.quote(shared)}/gate; touch {shlex.quote(shared)}/fixed")
    driven = _run.drive(ctx, sweep, row, checks=[], interval=1.0)
    assert [e["state"] for e in driven.elements] == ["COMPLETED", "CANCELLED"] + ["COMPLETED"] * 3 + ["CANCELLED"]


def test_killed_after_sbatch_reattaches_every_task_without_a_second_array(ctx, shared, runjob_home, monkeypatch):
    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/gate")
    sweep = make_sweep(shared, runjob_home, max_parallel=2, name="killed")
    row = _run.record(ctx, sweep)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # runjob dies after the scheduler took the array, before recording it

    with monkeypatch.context() as patch:
        patch.setattr(ctx.store, "record_submissions", killed)
        with pytest.raises(KeyboardInterrupt):
            _array.submit_group(ctx, sweep, row, list(range(6)), limit=2)
    jobs = _run.element_jobs(ctx.store, row.id)
    assert {ctx.store.latest_attempt(j.id).state for j in jobs.values()} == {"SUBMITTING"}
    assert {j.script for j in jobs.values()} == {None}  # stored with the submissions, which never came
    _run.settle(ctx, row)  # the rerun's first step: each element found by its tag's array marker
    for index, job in _run.element_jobs(ctx.store, row.id).items():  # and its script stored then, as it was made
        attempt = lifecycle.new_attempt(ctx, sweep.jobs[index], ctx.clusters["under-test"], job_id=job.id, n=1)
        assert job.script == lifecycle.render(ctx, sweep.jobs[index], attempt, ctx.clusters["under-test"]).script
    ids = ids_of(ctx, row)
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(6)]
    comment = f"runjob-array:{ctx.store.attempts(jobs[0].id)[0].tag}"
    tags = {ctx.store.latest_attempt(j.id).tag for j in jobs.values()}
    listed = [line.split("|", 1) for line in remote(ctx, "squeue -h -r --me -t all -o '%i|%k'").stdout.splitlines()]
    assert sorted(job_id for job_id, tag in listed if tag == comment) == sorted(ids)
    assert not [job_id for job_id, tag in listed if tag in tags]  # no element was submitted again on its own
    remote(ctx, f"rm -f {shlex.quote(shared)}/gate")
    reattached = [e for j in jobs.values() for e in ctx.store.events(j.id, kinds=("reattached",))]
    assert len(reattached) == 6 and all("not submitting again" in e.message for e in reattached)


def test_two_concurrent_runs_make_one_array(ctx, shared, runjob_home):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/fixed")
    name = f"twice{uuid.uuid4().hex[:6]}"  # the array's job name: only this test's arrays carry it
    spec = make_sweep(shared, runjob_home, name=name).spec
    (runjob_home / "twice.yaml").write_text(yaml.safe_dump(spec))
    runjob = str(Path(sys.executable).parent / "runjob")
    runs = [subprocess.Popen([runjob, "run", "twice.yaml", "--yes", "--interval", "1"], cwd=runjob_home,
                             env={**os.environ, "COLUMNS": "200"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    row = ctx.store.find_sweep(name)
    ids = ids_of(ctx, row)
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(6)]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3 * 3600))
    accounted = remote(ctx, f"sacct -n -X -P -o JobID,JobName -S {since} --name {name}").stdout.split()
    assert sorted(accounted) == sorted(f"{array}_{i}|{name}" for i in range(6))  # one array, no second one


def test_an_element_that_times_out_is_resumed_alone(ctx, shared, runjob_home):
    from pathlib import Path

    rows_job = Path(__file__).resolve().parents[3] / "tests" / "data" / "jobs" / "rows_job.py"
    (runjob_home / "project" / "rows_job.py").write_text(rows_job.read_text())
    spec = {"name": "slow", "cluster": "under-test", "workdir": "project", "command": "python3 rows_job.py 5 0.1",
            "resources": {"time": "1"},
            # 112 s: SLURM checks time limits every 30 s, so a 1-minute job is killed 60-90 s in
            # (87.5 s of rows ended just before the kill once on CI).
            "sweep": {"params": {"command": ["python3 rows_job.py 5 0.1", "python3 rows_job.py 250 0.45"]}}}
    sweep = sweep_from_mapping(spec, source=str(runjob_home / "slow.yaml"), base_dir=str(runjob_home))
    row = _run.record(ctx, sweep)
    driven = _run.drive(ctx, sweep, row, checks=[], interval=2.0)
    assert all(e["done"] for e in driven.elements)
    quick, slow = (ctx.store.attempts(job.id) for job in _run.element_jobs(ctx.store, row.id).values())
    array = quick[0].backend_job_id.split("_")[0]
    assert [a.backend_job_id for a in quick] == [f"{array}_0"]
    assert slow[0].backend_job_id == f"{array}_1" and slow[0].state == "TIMEOUT"
    assert all("_" not in a.backend_job_id for a in slow[1:]) and slow[-1].state == "COMPLETED"  # alone, not the array
    rows = (runjob_home / "results" / driven.elements[1]["job"]).rglob("*.jsonl")
    assert sum(len(p.read_text().splitlines()) for p in rows) == 250


def test_kill_minus_9_of_run_mid_sweep_then_rerun_submits_no_element_twice(ctx, shared, runjob_home):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/gate {shlex.quote(shared)}/fixed")
    name = f"kill{uuid.uuid4().hex[:6]}"  # the array's job name: only this test's jobs carry it
    (runjob_home / "kill.yaml").write_text(yaml.safe_dump(make_sweep(shared, runjob_home, name=name).spec))
    runjob = str(Path(sys.executable).parent / "runjob")
    env = {**os.environ, "COLUMNS": "200"}
    first = subprocess.Popen([runjob, "run", "kill.yaml", "--yes", "--interval", "1"], cwd=runjob_home, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # Killed while the array is queued and its first K=2 tasks hold at the gate.
    wait_until(lambda: len(remote(ctx, f"ls {shlex.quote(shared)}/running 2>/dev/null").stdout.split()) == 2,
               timeout=180, what="2 array tasks running at the gate")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    remote(ctx, f"rm -f {shlex.quote(shared)}/gate")
    rerun = subprocess.run([runjob, "run", "kill.yaml", "--yes", "--interval", "1"], cwd=runjob_home, env=env,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, (rerun.stdout, rerun.stderr)
    row = ctx.store.find_sweep(name)
    jobs = _run.element_jobs(ctx.store, row.id)
    assert len(jobs) == 6 and all(len(ctx.store.attempts(j.id)) == 1 for j in jobs.values())
    submitted = [e for j in jobs.values() for e in ctx.store.events(j.id, kinds=("submitted",))]
    assert len(submitted) == 6
    ids = ids_of(ctx, row)
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(6)]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3 * 3600))
    accounted = remote(ctx, f"sacct -n -X -P -o JobID,JobName,State -S {since} --name {name}").stdout.split()
    assert sorted(accounted) == sorted(f"{array}_{i}|{name}|COMPLETED" for i in range(6))  # one array, each task once
    overlap = [int(n) for n in remote(ctx, f"cat {shlex.quote(shared)}/overlap.txt").stdout.split()]
    assert len(overlap) == 6 and max(overlap) <= 2


def test_a_sweep_on_a_shared_postgresql_state_goes_out_as_one_array(pg_url, monkeypatch, runjob_home, slurm_env):
    # Team mode: the elements' rows, leases and events recorded in batches on PostgreSQL.
    monkeypatch.setenv("RUNJOB_STATE_URL", pg_url)
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    spec = {"name": "pgarr", "command": "echo element $RUNJOB_JOB_NAME", "cluster": "under-test",
            "sweep": {"params": {"i": [0, 1, 2, 3]}, "max_parallel": 2}}
    sweep = sweep_from_mapping(spec, source=str(runjob_home / "pgarr.yaml"), base_dir=str(runjob_home))
    context = lifecycle.open_context()
    try:
        assert context.store.shared
        row = _run.record(context, sweep)
        driven = _run.drive(context, sweep, row, checks=[], interval=1.0)
        ids = ids_of(context, row)
        assert ids == [f"{ids[0].split('_')[0]}_{i}" for i in range(4)]
        assert [e["state"] for e in driven.elements] == ["COMPLETED"] * 4
        assert context.store.held_leases("spec:") == context.store.held_leases("submit:") == []
        again = _run.record(context, sweep)  # the same sweep again: nothing new
        assert again.id == row.id and ids_of(context, again) == ids
    finally:
        context.close()


def test_an_element_folder_is_made_by_its_task_from_the_bundle(ctx, shared, runjob_home):
    # No workdir: nothing of an element is written at submit but its marker; its task makes its
    # folder from the array's bundle when it starts, makes its script from the array's one
    # model (the elements differ in params only), and runs it there.
    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/gate")
    command = ('while [ -e "$SWEEP_DIR/gate" ]; do sleep 0.2; done; '
               'python3 -c "import json, os, runjob_core.job; print(\'params\', json.load(open(\'params.json\')))"')
    values = [0.1, 0.2, 0.3, 0.4]
    spec = {"name": "made", "command": command, "cluster": "under-test", "env": {"SWEEP_DIR": shared},
            "sweep": {"params": {"lr": values}, "max_parallel": 1}}
    sweep = sweep_from_mapping(spec, source=str(runjob_home / "made.yaml"), base_dir=str(runjob_home))
    row = _run.record(ctx, sweep)
    _run.start(ctx, sweep, row, limit=1)
    jobs = _run.element_jobs(ctx.store, row.id)
    submissions = [json.loads(ctx.store.latest_attempt(jobs[i].id).submission_json) for i in range(4)]
    folders = [s["job_dir"] for s in submissions]
    array = f"{ctx.clusters['under-test'].scratch_path}/arrays/{jobs[0].id}.1"
    assert remote(ctx, f"test -f {shlex.quote(array)}/model.sh").ok
    bundled = remote(ctx, f"tar -t -f {shlex.quote(array)}/bundle.tar").stdout.split()
    assert "params.json" in bundled and "run.1.sh" not in bundled  # the scripts are made by the tasks
    wait_until(lambda: remote(ctx, f"test -f {shlex.quote(folders[0])}/params.json").ok, timeout=120,
               what="element 0's folder made by its task")
    assert not remote(ctx, f"test -e {shlex.quote(folders[2])}").ok  # element 2 waits behind %1: no folder yet
    remote(ctx, f"rm -f {shlex.quote(shared)}/gate")
    driven = _run.drive(ctx, sweep, row, checks=[], interval=1.0)
    assert [e["state"] for e in driven.elements] == ["COMPLETED"] * 4
    for index, (folder, submission) in enumerate(zip(folders, submissions)):
        lr = values[index]
        assert {"params.json", "run.1.sh", "runjob.json", "lib"} <= set(remote(ctx, f"ls {shlex.quote(folder)}").stdout.split())
        assert json.loads(remote(ctx, f"cat {shlex.quote(folder)}/params.json").stdout) == {"lr": lr}
        # The script the task made and ran is the element's own, byte for byte as the store has it.
        script = f"{shlex.quote(folder)}/run.1.sh"
        assert remote(ctx, f"cat {script}").stdout == jobs[index].script
        assert remote(ctx, f"stat -c %a {script}").stdout.strip() == "755"
        # The job-side library imported from the element's own lib/, the params read in its folder.
        assert f"params {{'lr': {lr}}}" in remote(ctx, f"cat {shlex.quote(submission['log_path'])}").stdout


def test_elements_whose_sbatch_lines_differ_go_out_one_by_one_with_their_folders_written_at_submit(ctx, shared,
                                                                                                     runjob_home):
    # checkpoint.signal_margin is not a resource shape, yet it is an #SBATCH line (--signal): the
    # three elements are one group, and the backend answers None (no array of these). The core
    # then writes each element's folder itself and submits each alone: the fallback of a backend
    # that takes `folders` and makes no array.
    remote(ctx, f"mkdir -p {shlex.quote(shared)} && touch {shlex.quote(shared)}/gate")
    command = 'while [ -e "$SWEEP_DIR/gate" ]; do sleep 0.2; done; cat params.json'
    spec = {"name": "margins", "command": command, "cluster": "under-test", "template": "training",
            "env": {"SWEEP_DIR": shared}, "resources": {"time": "10"},
            "sweep": {"params": {"checkpoint.signal_margin": [60, 90, 120], "lr": [0.5]}, "max_parallel": 3}}
    sweep = sweep_from_mapping(spec, source=str(runjob_home / "margins.yaml"), base_dir=str(runjob_home))
    row = _run.record(ctx, sweep)
    _run.start(ctx, sweep, row, limit=3)
    jobs = _run.element_jobs(ctx.store, row.id)
    attempts = [ctx.store.latest_attempt(jobs[i].id) for i in range(3)]
    assert all("_" not in a.backend_job_id for a in attempts)  # three jobs, not an array
    assert len({a.backend_job_id for a in attempts}) == 3
    assert [f"--signal=B:USR1@{m}" in jobs[i].script for i, m in enumerate((60, 90, 120))] == [True] * 3
    submissions = [json.loads(a.submission_json) for a in attempts]
    for submission in submissions:  # written at submit, while every element still waits at the gate
        listed = set(remote(ctx, f"ls {shlex.quote(submission['job_dir'])}").stdout.split())
        assert {"params.json", "run.1.sh", "runjob.json", "lib"} <= listed, listed
    first = attempts[0]
    assert not remote(ctx, f"test -e {shlex.quote(ctx.clusters['under-test'].scratch_path)}/arrays/"
                           f"{first.job_id}.{first.n}").ok  # no array folder was made for them
    remote(ctx, f"rm -f {shlex.quote(shared)}/gate")
    driven = _run.drive(ctx, sweep, row, checks=[], interval=1.0)
    assert [e["state"] for e in driven.elements] == ["COMPLETED"] * 3
    assert '"lr": 0.5' in remote(ctx, f"cat {shlex.quote(submissions[2]['log_path'])}").stdout
