"""The SLURM backend against the raw tools, on the test cluster (scripts/test-cluster.sh up).

1. `runjob submit --yes` of a small job (a whole CLI process) vs `ssh -p 2222 host sbatch script`,
   with a new connection each time and with OpenSSH's ControlMaster sharing one
   (target: at most 1.5x).
2. One poll cycle over 200 queued jobs vs one raw `squeue` over the same open connection
   (target: at most 1.5x) and the remote commands per cycle (target: 2 at most).
3. 50 submissions in one process vs 50 separate `ssh host sbatch` calls (target: at most 0.5x).

Section 2 also prints the monitor's memory (RSS, and what one cycle allocates) and, with
``--record FILE``, saves the squeue output it polled (bench_cycle_recorded.py replays it).
Job names carry this run's id, and only those names are cancelled at the end.

4. One-shot `runjob status` (a whole process, as a user types it) over the queued jobs vs
   `ssh host squeue -h -u USER` over OpenSSH's ControlMaster (target: at most 1.2x), and how
   many of those status processes wrote to the store (target: none, nothing changed).

Run: .venv/bin/python bench/bench_slurm.py [--reps N] [--queued 200] [--only submit,poll,status,fifty] [--record FILE]
     [--baseline CHECKOUT]  (sections 1 and 4 also time another checkout's runjob, say main before a change)
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import checkout_pythonpath, median_ms, show, time_call, time_interleaved  # noqa: E402

from runjob_core import warm  # noqa: E402
from runjob_core.testing import write_clusters_yaml  # noqa: E402
from runjob_core.warm import native  # noqa: E402
from runjob_slurm.testing import read_cluster_env, slurm_cluster_config  # noqa: E402

BIN = Path(sys.executable).parent
#: The warm path's Python client, as ``runjob`` runs it where no native client is installed.
PYTHON_CLIENT = [sys.executable, str(Path(warm.__file__).parent / "python" / "runjob")]


def client_in_use() -> str:
    """What ``runjob`` is here: the native client (runjob_core/warm/client.c) or Python's console script."""
    key = native.installed_key(str(BIN / "runjob"))
    return "the native client" if key else "the Python console script (no native client installed)"


def ssh_argv(env: dict[str, str], command: str) -> list[str]:
    return ["ssh", "-p", env["RUNJOB_TEST_SSH_PORT"], "-i", env["RUNJOB_TEST_SSH_KEY"], "-o",
            f"UserKnownHostsFile={env['RUNJOB_TEST_KNOWN_HOSTS']}", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            f"{env['RUNJOB_TEST_SSH_USER']}@{env['RUNJOB_TEST_SSH_HOST']}", command]


def submit_section(args, work: Path, env_vars: dict, submit: list, raw: list, control: list) -> None:
    subprocess.run(control, check=True, capture_output=True)  # opens the shared connection
    # The first command starts runjob's agent (the shared connection) and its warm process.
    subprocess.run(submit, cwd=work, env=env_vars, check=True, capture_output=True)
    # Each runjob variant keeps a state of its own: a process that exits normally checkpoints and
    # deletes SQLite's WAL (a warm child never does), so the next writer of a shared state would
    # pay for creating it again (two fsyncs) and the order of the runs would decide who pays.
    cold_env = {**env_vars, "RUNJOB_WARM": "0", "RUNJOB_HOME": str(_own_home(work, "cold"))}
    runs = [
        lambda: subprocess.run(raw, check=True, capture_output=True),
        lambda: subprocess.run(control, check=True, capture_output=True),
        lambda: subprocess.run(submit, cwd=work, env=env_vars, check=True, capture_output=True),
        lambda: subprocess.run(submit, cwd=work, env=cold_env, check=True, capture_output=True),
        lambda: subprocess.run([*PYTHON_CLIENT, *submit[1:]], cwd=work, env=env_vars, check=True, capture_output=True),
    ]
    labels = ["ssh -p 2222 host sbatch script (new connection)", "ssh with ControlMaster (connection shared)",
              f"runjob submit --yes (the default: warm process, shared agent; runjob is {client_in_use()})",
              "runjob submit --yes, RUNJOB_WARM=0 (new process: imports, render, sbatch)",
              "runjob submit --yes, warm, through the Python client (no native client)"]
    if args.baseline:
        # Its own state too (and the two sides' schemas may differ: an index the other would use).
        before_env = {**env_vars, "PYTHONPATH": checkout_pythonpath(args.baseline), "RUNJOB_HOME": str(_own_home(work, "before"))}
        subprocess.run(submit, cwd=work, env=before_env, check=True, capture_output=True)  # its warm process is up
        runs.append(lambda: subprocess.run(submit, cwd=work, env=before_env, check=True, capture_output=True))
        labels.append(f"before ({args.baseline}): runjob submit --yes, warm")
    rows = list(zip(labels, time_interleaved(runs, args.reps)))
    show("1. submit one small job", rows, target="runjob at most 1.0x ssh sbatch")
    for label, row in (("warm process", rows[2]), ("RUNJOB_WARM=0", rows[3]), ("warm, Python client", rows[4]),
                       *(("before, warm", r) for r in rows[5:])):
        shared = median_ms(row[1]) / median_ms(rows[1][1])
        print(f"  runjob ({label}) vs ssh with ControlMaster: {shared:.2f}x (target: at most 3x)")
    subprocess.run([*control[:-2], "-O", "exit", control[-2]], capture_output=True)


def _own_home(work: Path, name: str) -> Path:
    home = work / name / ".runjob"
    home.mkdir(parents=True)
    shutil.copy(work / ".runjob" / "clusters.yaml", home / "clusters.yaml")
    return home


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--queued", type=int, default=200)
    parser.add_argument("--only", default="submit,poll,status,fifty", help="sections to run")
    parser.add_argument("--record", help="save the polled squeue output here")
    parser.add_argument("--baseline", help="a checkout of another runjob (say main before a change): sections 1 and 4 time"
                        " its `runjob submit` and `runjob status` in turn with this one's (PYTHONPATH, a warm process of its own)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    run_id = f"{os.getpid():x}"
    names = {key: f"{key}-{run_id}" for key in ("queued", "fifty", "benchjob")}
    env = read_cluster_env()
    scratch = env["RUNJOB_TEST_SCRATCH"] + "/runjob-bench"
    cluster = slurm_cluster_config(env, name="bench", scratch_path=scratch)
    subprocess.run(ssh_argv(env, f"mkdir -p {scratch} && printf '#!/bin/bash\\ntrue\\n' > {scratch}/plain.sh"), check=True)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_clusters_yaml(work / ".runjob" / "clusters.yaml", [cluster])
        (work / "job.yaml").write_text(f"name: {names['benchjob']}\ncluster: bench\ncommand: 'true'\n")
        env_vars = {**os.environ, "RUNJOB_HOME": str(work / ".runjob")}
        submit = [str(BIN / "runjob"), "submit", "job.yaml", "--yes", "--new"]
        raw = ssh_argv(env, f"sbatch --parsable -o /dev/null {scratch}/plain.sh")
        # The raw tool at its best: OpenSSH sharing one connection (what runjob's agent does).
        control = [*raw[:1], "-o", "ControlMaster=auto", "-o", f"ControlPath={work}/cm-%C", "-o", "ControlPersist=120",
                   *raw[1:]]
        if "submit" in only:
            submit_section(args, work, env_vars, submit, raw, control)

        os.chdir(work)
        os.environ["RUNJOB_HOME"] = str(work / ".runjob")
        from runjob_core import lifecycle
        from runjob_core.config import job_from_mapping

        context = lifecycle.open_context()
        transport = context.transport(context.clusters["bench"])
        try:
            if "poll" in only:
                poll_section(args, env, context, transport, work, names["queued"])
            if "status" in only:
                status_section(args, env, context, work, names["queued"], env_vars, control)
            if "fifty" in only:
                quick = job_from_mapping({"name": names["fifty"], "cluster": "bench", "command": "true",
                                          "resources": {"partition": "maint"}}, source="bench", base_dir=str(work))
                many = time_call(lambda: [lifecycle.submit(context, quick, context.clusters["bench"], new=True) for _ in range(50)], 1)
                one_ssh = time_call(lambda: subprocess.run(raw, check=True, capture_output=True), 5)
                estimate = median_ms(one_ssh) * 50
                print("\n3. 50 submissions")
                print(f"  50 x ssh host sbatch (5 measured x 50)          {estimate:9.1f} ms")
                print(f"  runjob: 50 x lifecycle.submit in one process  {many[0] * 1000:9.1f} ms  {many[0] * 1000 / estimate:5.2f}x")
                print("  target: at most 0.5x")
        finally:
            user = shlex.quote(env["RUNJOB_TEST_SSH_USER"])
            # One name per scancel: SLURM 22.05 cancelled only the first of a comma list,
            # so earlier runs left 50 jobs queued each (and slowed every later squeue).
            transport.run_shell("; ".join(f"scancel -u {user} -n {shlex.quote(name)}" for name in names.values()))
            context.close()


def queue_jobs(args, context, work: Path, name: str) -> list[str]:
    """*args.queued* jobs waiting in the ``maint`` partition (down: they stay queued), once."""
    from runjob_core import lifecycle
    from runjob_core.config import job_from_mapping

    known = [row.id for row in context.store.list_jobs(limit=10**6) if row.name == name]
    if known:
        return known
    queued_job = job_from_mapping({"name": name, "cluster": "bench", "command": "true",
                                   "resources": {"partition": "maint"}}, source="bench", base_dir=str(work))
    return [lifecycle.submit(context, queued_job, context.clusters["bench"], new=True)[0].id for _ in range(args.queued)]


def status_section(args, env: dict, context, work: Path, name: str, env_vars: dict, control: list) -> None:
    import sqlite3

    from runjob_core import monitor

    ids = queue_jobs(args, context, work, name)
    monitor.cycle(context, ids)  # every job recorded as queued: what follows changes nothing
    squeue = [*control[:-1], f"squeue -h -u {shlex.quote(env['RUNJOB_TEST_SSH_USER'])}"]
    status = [str(BIN / "runjob"), "status"]
    cold_env = {**env_vars, "RUNJOB_WARM": "0"}
    subprocess.run(squeue, check=True, capture_output=True)  # the shared connection is up
    subprocess.run(status, cwd=work, env=env_vars, check=True, capture_output=True)  # the warm process is up
    watcher = sqlite3.connect(work / ".runjob" / "state.db")
    version = lambda: watcher.execute("PRAGMA data_version").fetchone()[0]  # noqa: E731 - moves on another connection's commit
    # What the store holds, row by row: data_version also moves when a WAL checkpoint resets the log
    # (the warm child settles a WAL over 1 MiB after answering), which writes no row.
    content = lambda: watcher.execute(  # noqa: E731
        "SELECT (SELECT max(id) FROM events), (SELECT count(*) FROM leases),"
        " (SELECT group_concat(job_id || n || state || coalesce(reason, '') || coalesce(step, '')) FROM attempts),"
        " (SELECT group_concat(id || state || coalesce(outcome, '')) FROM jobs)").fetchone()
    wrote, moved, timed = [], [], {}

    def one_status(row: int, environ: dict, program: list[str] = status[:1]) -> None:
        """One status process, timed alone: the store's before/after reads (~ms at 2,000 jobs) are not its time."""
        before, rows = version(), content()
        start = time.perf_counter()
        subprocess.run([*program, *status[1:]], cwd=work, env=environ, check=True, capture_output=True)
        timed.setdefault(row, []).append(time.perf_counter() - start)
        moved.append(version() != before)
        wrote.append(content() != rows)

    runs = [lambda: subprocess.run(squeue, check=True, capture_output=True), lambda: one_status(1, env_vars),
            lambda: one_status(2, cold_env), lambda: one_status(3, env_vars, PYTHON_CLIENT)]
    labels = ["ssh (ControlMaster) host squeue -h -u USER",
              f"runjob status (the default: warm process, shared agent; runjob is {client_in_use()})",
              "runjob status, RUNJOB_WARM=0", "runjob status, warm, through the Python client (no native client)"]
    if args.baseline:
        before_env = {**env_vars, "PYTHONPATH": checkout_pythonpath(args.baseline)}
        subprocess.run(status, cwd=work, env=before_env, check=True, capture_output=True)  # its warm process is up
        runs.append(lambda: one_status(4, before_env))
        labels.append(f"before ({args.baseline}): runjob status, warm")
    samples = time_interleaved(runs, args.reps)
    for row, own in timed.items():
        samples[row] = own  # the status process alone, one sample per round as the others
    show(f"4. one-shot `runjob status` with {len(ids)} jobs queued (whole processes)", list(zip(labels, samples)),
         target="runjob status at most 1.2x")
    print(f"  status processes that changed a row of the store: {sum(wrote)} of {len(wrote)} (nothing changed: target 0);"
          f" that moved its data_version (a WAL checkpoint counts): {sum(moved)}")
    watcher.close()


def poll_section(args, env: dict, context, transport, work: Path, name: str) -> None:
    from runjob_core import lifecycle, monitor

    ids = queue_jobs(args, context, work, name)
    rss_before = _rss_mib()
    # As `runjob watch` cycles: it keeps its observe leases (one writer per job) between cycles.
    watching = functools.partial(monitor.cycle, keep_leases=True)
    watching(context, ids)  # first cycle records PENDING states
    watching(context, ids)  # and this one the memo of unchanged jobs
    squeue = ["squeue", "-h", "-u", env["RUNJOB_TEST_SSH_USER"]]
    cycles: list[float] = []
    one_shot: list[float] = []
    raws: list[float] = []
    commands = 0
    for _ in range(args.reps * 2):  # interleaved: slurmctld's load changes hit both alike
        raws.extend(time_call(lambda: transport.run(squeue), 1))
        before = len(transport.commands)
        cycles.extend(time_call(lambda: watching(context, ids), 1))
        commands += len(transport.commands) - before
    # `runjob status` in a process of its own, with no `watch` following the jobs: a fresh
    # context (empty memo, its own store connection and lease owner) for each cycle, over
    # the same open connection; opening it is not timed (that is start-up, section 4).
    monitor.Monitor.of(context).release_leases()
    raws_again: list[float] = []
    writes = 0
    for _ in range(args.reps):
        raws_again.extend(time_call(lambda: transport.run(squeue), 1))
        fresh = lifecycle.open_context()
        fresh._transports[("bench", None)] = transport
        before = fresh.store.generation()[1]
        one_shot.extend(time_call(lambda: monitor.cycle(fresh, ids), 1))
        writes += fresh.store.generation()[1] - before
        fresh._transports.clear()  # the shared connection is not this context's to close
        fresh.close()
    per_cycle = commands / len(cycles)
    show(f"2. one poll cycle over {args.queued} queued jobs (same open connection)", [
        ("raw `squeue -h -u USER` over paramiko", raws),
        ("runjob monitor cycle, as `watch` runs it (poll + store + health)", cycles),
    ], target="at most 1.2x (the watch cycle)")
    show("   one-shot cycles, as `runjob status` runs them in a new process (nothing changed)", [
        ("raw `squeue -h -u USER` over paramiko", raws_again),
        ("one-shot cycle of a fresh context (no lease taken: nothing to record)", one_shot),
    ], target="at most 1.2x")
    print(f"  store rows written by {args.reps} one-shot cycles: {writes} (target: 0)")
    print(f"  remote commands per cycle: {per_cycle:.1f} (target: 2 at most)")
    tracemalloc.start()
    monitor.cycle(context, ids)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  monitor memory: RSS {_rss_mib():.0f} MiB ({_rss_mib() - rss_before:+.1f} MiB since the jobs were submitted); "
          f"one cycle allocates at most {peak / 2**20:.1f} MiB")
    if args.record:
        from runjob_slurm import _parse

        Path(args.record).write_text(transport.run(_parse.squeue_poll_argv(env["RUNJOB_TEST_SSH_USER"])).stdout)
        print(f"  squeue output saved to {args.record}")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


if __name__ == "__main__":
    main()
