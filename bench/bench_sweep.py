"""Sweeps (issue 26) against the raw tools, on the test cluster (scripts/test-cluster.sh up).

1. Submitting an N-element sweep (runjob's own work: N jobs recorded and rendered, their files
   packed into one bundle each task unpacks when it starts, then one ``sbatch --array``) vs one
   raw ``sbatch --array=0-(N-1)%1`` of a script over the same open SSH connection (target in the
   issue: at most 1.5x).
2. One poll of the array's N tasks (the backend's ``runjob_poll``: one ``squeue -r``, sacct only for
   tasks that left the queue) and one whole monitor cycle, vs one raw ``squeue -h -r -u USER`` over
   the same connection (target: at most 1.2x).
1b. The issue's own comparison, whole processes: ``runjob submit SWEEP.yaml --yes`` (the CLI as a
   user types it, runjob's agent and warm process up) vs ``ssh host sbatch --array=0-(N-1)%1
   script`` with a new connection, and with OpenSSH's ControlMaster sharing one.
3. ``runjob report SWEEP --json`` data (``_report.build``) of an N-element sweep whose elements each
   collected 100 scored rows, in a local store (target: at most 2 s).

Arrays run ``true`` with ``%1`` and are cancelled at the end (only this run's, by id).

Run: .venv/bin/python bench/bench_sweep.py [--elements 1000] [--reps 3] [--baseline CHECKOUT]... [--cancel-each]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_ms, show, time_call, time_interleaved  # noqa: E402

from runjob_core.testing import write_clusters_yaml  # noqa: E402
from runjob_slurm.testing import read_cluster_env, slurm_cluster_config  # noqa: E402


def sweep_spec(name: str, n: int) -> dict:
    return {"name": name, "command": "true", "cluster": "bench",
            "sweep": {"params": {"i": list(range(n))}, "max_parallel": 1}}


def put_raw_script(context, cluster) -> str:
    """The raw side's array script (``true``), on the cluster's scratch."""
    transport = context.transport(cluster)
    folder = f"{cluster.scratch_path}/bench-raw"
    transport.makedirs(folder)
    transport.put_text(f"{folder}/array.sh", "#!/bin/bash\n#SBATCH --output=/dev/null\ntrue\n", mode=0o755)
    return f"{folder}/array.sh"


def submit_section(args, context, cluster, user: str, arrays: list[str]) -> list:
    from runjob_core.sweep import _run, sweep_from_mapping

    transport = context.transport(cluster)
    raw_script = put_raw_script(context, cluster)
    raw_argv = ["sbatch", "--parsable", "--array", f"0-{args.elements - 1}%1", "-p", "debug",
                *(["-A", cluster.options.default_account] if cluster.options.default_account else []), raw_script]
    rows = []

    def raw() -> None:
        result = transport.run(raw_argv, idempotent=False)
        arrays.append(result.stdout.strip().split(";")[0])

    def ours() -> None:
        name = f"bsw{len(rows)}{os.getpid()}"
        rows.append(name)
        sweep = sweep_from_mapping(sweep_spec(name, args.elements), source=f"{name}.yaml", base_dir=str(Path.cwd()))
        row = _run.record(context, sweep)
        not_started: dict[int, str] = {}
        _run.start(context, sweep, row, limit=1, not_started=not_started)
        if not_started:
            raise SystemExit(f"the sweep's array was not submitted: {next(iter(not_started.values()))}")
        ids = {context.store.latest_attempt(j.id).backend_job_id.split("_")[0]
               for j in _run.element_jobs(context.store, row.id).values()}
        assert len(ids) == 1, ids  # one sbatch: one array
        arrays.extend(ids)

    samples = time_interleaved([raw, ours], args.reps)
    show(f"1. submit a {args.elements}-element sweep (one array)", [
        (f"raw: sbatch --array=0-{args.elements - 1}%1 (same connection)", samples[0]),
        ("runjob: record + render N jobs, one bundle + one sbatch --array", samples[1]),
    ], target="<= 1.5x")
    per_element = median_ms(samples[1]) / args.elements
    print(f"   runjob per element: {per_element:.2f} ms (recording, rendering; the folders made by the tasks from one bundle)")
    return rows


def whole_process_section(args, env: dict, work: Path, cluster, arrays: list[str], cancel) -> None:
    import subprocess

    import yaml

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_slurm import ssh_argv

    folder = f"{cluster.scratch_path}/bench-raw"
    raw = ssh_argv(env, f"sbatch --parsable -o /dev/null --array 0-{args.elements - 1}%1 -p debug {folder}/array.sh")
    control = [*raw[:1], "-o", "ControlMaster=auto", "-o", f"ControlPath={work}/cm-%C", "-o", "ControlPersist=120",
               *raw[1:]]
    runjob = str(Path(sys.executable).parent / "runjob")
    environ = {**os.environ, "RUNJOB_HOME": str(work / ".runjob")}
    made = []

    def ssh(argv: list[str]) -> None:
        arrays.append(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip().split(";")[0])

    def ours(env=environ, state=None) -> None:
        name = f"wsw{len(made)}x{os.getpid()}"
        made.append((name, state))
        (work / f"{name}.yaml").write_text(yaml.safe_dump(sweep_spec(name, args.elements)))
        subprocess.run([runjob, "submit", f"{name}.yaml", "--yes"], cwd=work, env=env, check=True, capture_output=True)

    def untimed(fn) -> None:  # a warm-up: tried again when a busy slurmctld refuses its sbatch
        for attempt in range(3):
            try:
                return fn()
            except subprocess.CalledProcessError:
                if attempt == 2:
                    raise
                time.sleep(5)

    untimed(lambda: ssh(control))  # opens the shared connection
    untimed(ours)  # starts runjob's agent and warm process, as the first command of a session does
    runs = [lambda: ssh(raw), lambda: ssh(control), ours]
    labels = [f"raw: ssh host sbatch --array=0-{args.elements - 1}%1 (new connection)",
              "raw: the same over OpenSSH's ControlMaster", "runjob submit SWEEP.yaml --yes"]
    for number, checkout in enumerate(args.baseline or []):  # another checkout's runjob (say main before a
        # change), its own state; run with PYTHONPATH, so through the Python client (the native one defers to it)
        from _timing import checkout_pythonpath

        state = work / f"before{number}" / ".runjob"
        state.mkdir(parents=True)
        (state / "clusters.yaml").write_text((work / ".runjob" / "clusters.yaml").read_text())
        before = {**environ, "PYTHONPATH": checkout_pythonpath(checkout), "RUNJOB_HOME": str(state)}
        untimed(lambda before=before, state=state: ours(before, state))  # its warm process is up
        runs.append(lambda before=before, state=state: ours(before, state))
        labels.append(f"{checkout} (Python client): runjob submit SWEEP.yaml --yes")
    if args.cancel_each:  # every array cancelled right after its submit (untimed): the cluster's load stays the same
        samples = [[] for _ in runs]
        dropped = 0
        for _ in range(args.reps):
            taken = []
            try:
                for fn in runs:
                    seen_arrays, seen_sweeps = len(arrays), len(made)
                    try:
                        taken.extend(time_call(fn, 1))
                    finally:
                        cancel(arrays[seen_arrays:], [name for name, _state in made[seen_sweeps:]])
            except subprocess.CalledProcessError as exc:
                # sbatch refused by a busy slurmctld ("Slurm temporarily unable to accept job", after its own
                # retries): the whole round is left out, for every row alike, and counted
                dropped += 1
                print(f"   round left out: {shlex.join(exc.cmd)[-60:]} exited {exc.returncode}: "
                      f"{(exc.stderr or '').strip()[-160:]}")
                continue
            for into, sample in zip(samples, taken):
                into.append(sample)
        if dropped:
            print(f"   {dropped} of {args.reps} rounds left out (a submit refused by the cluster)")
    else:
        samples = time_interleaved(runs, args.reps)
    show(f"1b. submit a {args.elements}-element sweep, whole processes"
         + (" (each array cancelled after its submit)" if args.cancel_each else ""), list(zip(labels, samples)),
         target="<= 1.5x the first row")
    subprocess.run([*control[:-2], "-O", "exit", control[-2]], capture_output=True)
    from runjob_core.store import Store
    from runjob_core.sweep import _run

    for state in {state for _name, state in made}:  # the CLI's arrays, cancelled with the others
        store = Store((state or work / ".runjob") / "state.db")
        for name in (name for name, its in made if its == state):
            sweep = store.find_sweep(name)
            latest = [store.latest_attempt(job.id) for job in _run.element_jobs(store, sweep.id).values()] if sweep else []
            arrays.extend({a.backend_job_id.split("_")[0] for a in latest if a is not None and a.backend_job_id})
        store.close()


def poll_section(args, context, cluster, user: str, name: str) -> None:
    from runjob_core import monitor
    from runjob_core.sweep import _run
    from runjob_slurm import _backend

    transport = context.transport(cluster)
    row = context.store.find_sweep(name)
    jobs = list(_run.element_jobs(context.store, row.id).values())
    # The array held where it is (its pending tasks stay in the queue: the steady state of a
    # long sweep); one cycle records the tasks that ended before the hold, as the monitor does,
    # and later polls ask only about the tasks still queued.
    array = context.store.latest_attempt(jobs[0].id).backend_job_id.split("_")[0]
    transport.run(["scontrol", "hold", array])
    for _ in range(120):  # the task running at the hold ends on its own (`true`)
        if "RUNNING" not in transport.run(["squeue", "-h", "-r", "-j", array, "-o", "%T"]).stdout:
            break
        time.sleep(0.5)
    time.sleep(2)  # and accounting records it
    monitor.cycle(context, [j.id for j in jobs])
    active = {a.job_id for a in context.store.active_attempts([j.id for j in jobs])}
    submissions = [context.store.latest_attempt(j.id).submission for j in jobs if j.id in active]
    ids = [j.id for j in jobs if j.id in active]

    def raw() -> None:
        transport.run(["squeue", "-h", "-r", "-u", user])

    def poll() -> None:
        context.scratchpad("runjob-slurm:live-lines").clear()  # no memo: every line parsed
        _backend.poll(submissions, cluster, context)

    def poll_memo() -> None:
        _backend.poll(submissions, cluster, context)  # lines unchanged since the last cycle: the memo's statuses

    def cycle() -> None:
        monitor.cycle(context, ids)

    samples = time_interleaved([raw, poll, poll_memo, cycle], args.reps)
    show(f"2. one poll of the array's {len(submissions)} queued tasks", [
        ("raw: squeue -h -r -u USER (same connection)", samples[0]),
        ("runjob_poll, every line parsed (one squeue -r)", samples[1]),
        ("runjob_poll, a steady cycle (lines as before)", samples[2]),
        ("monitor.cycle (poll + store + health)", samples[3]),
    ], target="<= 1.2x")


def report_section(args) -> None:
    from runjob_core.collecting import manifest, results_folder
    from runjob_core.store import Store
    from runjob_core.sweep import _report

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        store = Store(Path(tmp) / ".runjob" / "state.db")
        elements = [{"index": i, "name": f"i-{i}", "values": {"i": i}, "job": f"rep-i-{i}", "spec_hash": "x"}
                    for i in range(args.elements)]
        store.create_sweep(sweep_id="sw-bench", name="rep", spec_hash="h", spec_json="{}",
                           elements_json=json.dumps(elements), max_parallel=1)
        for element in elements:
            job_id = store.create_job(name=element["job"], cluster="local", backend="local", spec_json="{}",
                                      spec_hash="x", spec_path=None, sweep_id="sw-bench", sweep_index=element["index"])
            attempt = store.begin_attempt(job_id)
            store.record_submission(job_id, attempt.n, "{}", f"local-{element['index']}", time.time())
            store.update_attempt(job_id, attempt.n, state="COMPLETED", started_at=time.time() - 60, ended_at=time.time())
            store.add_event(job_id, "collected", "collected")
            dest = results_folder(store.get_job(job_id))
            dest.mkdir(parents=True)
            with open(dest / "results.jsonl", "w") as out:
                for r in range(100):
                    out.write(json.dumps({"id": r, "response": "x", "score": (r * 7 + element["index"]) % 3 == 0}) + "\n")
            manifest.write(dest, job_id, attempt.n, ["results.jsonl"], final=True)
        samples = time_call(lambda: _report.build(store, store.find_sweep("rep")), args.reps)
        store.close()
    show(f"3. runjob report of a {args.elements}-element sweep (100 rows each)", [("report build", samples)],
         target="<= 2 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="submit,process,poll,report")
    parser.add_argument("--cancel-each", action="store_true", help="section 1b cancels each array right after its "
                        "submit (untimed), so that earlier arrays' tasks do not load the cluster")
    parser.add_argument("--baseline", action="append", help="a checkout of another runjob (say main before a change): "
                        "section 1b times its runjob submit too, alternating (repeatable; this checkout itself "
                        "gives its own through the Python client)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "report" in only:
        report_section(args)
    if not only & {"submit", "process", "poll"}:
        return
    from runjob_core import lifecycle

    env = read_cluster_env()
    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    os.chdir(work)
    cluster = slurm_cluster_config(env, name="bench")
    write_clusters_yaml(work / ".runjob" / "clusters.yaml", [cluster])
    context = lifecycle.open_context()
    user = env["RUNJOB_TEST_SSH_USER"]
    arrays: list[str] = []
    try:
        names = submit_section(args, context, cluster, user, arrays) if only & {"submit", "poll"} else []
        if "process" in only:
            put_raw_script(context, cluster)

            def cancel(ids: list[str], names: list[str]) -> None:
                transport = context.transport(cluster)
                for argv in ([["scancel", *ids]] if ids else []) + [["scancel", "--name", name] for name in names]:
                    transport.run(argv)

            whole_process_section(args, env, work, cluster, arrays, cancel)
        if "poll" in only:
            poll_section(args, context, cluster, user, names[-1])
    finally:
        if arrays:
            context.transport(cluster).run(["scancel", *arrays])
        print(f"\ncancelled this run's arrays: {' '.join(shlex.quote(a) for a in arrays)}")
        context.close()


if __name__ == "__main__":
    main()
