"""Team mode's speed (issue 27): the same work on a SQLite state and on a PostgreSQL state, side by side.

1. One monitor cycle over N followed jobs (SLURM jobs whose squeue answer is recorded output, as
   bench_cycle_recorded.py: what is timed is runjob's own work, most of it the store's), on each
   backend; the ratio PostgreSQL / SQLite (target: at most 1.5x at 2,000 jobs).
2. ``runjob status --no-refresh`` listing 10,000 jobs (``-n 10000 --json``), and the default listing,
   as a user runs it (a new process each time; target: at most 1 s).
3. How long an event written by one process (a watcher on host A) takes to be seen by another (host
   B polling the store, as ``runjob events`` or ``status`` read it), and one ``runjob events --json``
   process run on the other host after the write (target: within 1 s).

PostgreSQL is the test server of scripts/test-cluster.sh (127.0.0.1:5433, over TCP), in a schema of
this run's own, dropped at the end.

Run: .venv/bin/python bench/bench_team.py [--jobs 2000] [--status-jobs 10000] [--reps 10] [--only cycle,status,events]
     [--baseline CHECKOUT]  (CHECKOUT: say `git worktree add /tmp/before main`; its status is timed in turn)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _recorded_queue import queued_context  # noqa: E402
from _timing import checkout_pythonpath  # noqa: E402

from runjob_core.testing._state import pg_schema  # noqa: E402 - the tests' PostgreSQL setup, one for both

RUNJOB = str(Path(sys.executable).parent / "runjob")


@contextmanager
def state(kind: str):
    """(url, folder): a fresh state of *kind* and a working folder for it."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            yield f"sqlite://{tmp}/state.db", Path(tmp)
        else:
            with pg_schema("bench_") as url:
                yield url, Path(tmp)


def cycle_ms(count: int, reps: int) -> dict[str, list[float]]:
    """Cycle times on both backends, the two monitors cycling in turn (load on a shared machine hits
    both alike)."""
    from runjob_core import monitor

    with state("sqlite") as (sqlite_url, sqlite_folder), state("postgresql") as (pg_url, pg_folder):
        contexts = {}
        for kind, url, folder in (("sqlite", sqlite_url, sqlite_folder), ("postgresql", pg_url, pg_folder)):
            os.environ["RUNJOB_STATE_URL"] = url
            context, ids, _transport = queued_context(folder, count)
            contexts[kind] = (context, ids)
        os.environ.pop("RUNJOB_STATE_URL", None)
        try:
            samples: dict[str, list[float]] = {kind: [] for kind in contexts}
            for rep in range(reps + 2):
                for kind, (context, ids) in contexts.items():
                    start = time.perf_counter()
                    monitor.cycle(context, ids)
                    if rep >= 2:  # the first two cycles fill the caches
                        samples[kind].append((time.perf_counter() - start) * 1000)
            return samples
        finally:
            for context, _ids in contexts.values():
                context.close()


def fill(store, count: int) -> None:
    """*count* finished jobs with one attempt each, written in bulk (the setup, not what is timed)."""
    now = time.time()
    jobs = [(f"rj-s{i:07d}", f"exp-{i % 50}", "local", "local", '{"name": "exp"}', "h", None, "full", now - count + i,
             "COMPLETED", None, None, f"user{i % 5}@host{i % 3}") for i in range(count)]
    attempts = [(job[0], 1, f"runjob:{job[0]}:1", "COMPLETED", f"local-{i}", None, job[8], job[8], job[8] + 60, 0,
                 job[12]) for i, job in enumerate(jobs)]
    with store.transaction():
        store._db.executemany("INSERT INTO jobs(id, name, cluster, backend, spec_json, spec_hash, spec_path, kind,"
                              " created_at, state, outcome, script, who) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", jobs)
        store._db.executemany("INSERT INTO attempts(job_id, n, tag, state, backend_job_id, submission_json,"
                              " submitted_at, started_at, ended_at, exit_code, who) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                              attempts)


def clean_env() -> dict[str, str]:
    """The environment without what part 1 set for its own folder (cluster file, state folder)."""
    return {k: v for k, v in os.environ.items() if k not in ("RUNJOB_CLUSTERS", "RUNJOB_HOME", "RUNJOB_STATE_URL")}


def timed_process(argv: list[str], folder: Path, env: dict, reps: int) -> tuple[list[float], str]:
    samples, out = [], ""
    for _ in range(reps):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
        samples.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
        out = done.stdout
    return samples, out


def status_ms(kind: str, count: int, reps: int, baseline: str | None) -> dict[str, list[float]]:
    """``runjob status`` processes over *count* stored jobs, as a user runs them (the warm process
    of the default path started first); with *baseline* (a checkout of another runjob), the same
    commands of that code (``PYTHONPATH``, a warm process of its own) in turn with this one's."""
    from runjob_core.store import Store

    with state(kind) as (url, folder):
        store = Store(url) if kind == "postgresql" else Store(Path(url.removeprefix("sqlite://")))
        fill(store, count)
        store.close()
        env = {**clean_env(), "RUNJOB_STATE_URL": url, "RUNJOB_HOME": str(folder / ".runjob"), "COLUMNS": "200"}
        envs = {"": env}
        if baseline:
            envs["before: "] = {**env, "PYTHONPATH": checkout_pythonpath(baseline)}
        commands = {"-n N --json (every job)": [RUNJOB, "status", "--no-refresh", "-n", str(count), "--json"],
                    "the default listing (20 latest)": [RUNJOB, "status", "--no-refresh"]}
        samples: dict[str, list[float]] = {}
        for label, environ in envs.items():  # each side's warm process up
            for argv in commands.values():
                timed_process(argv, folder, environ, 1)
        for _ in range(reps):
            for what, argv in commands.items():
                for label, environ in envs.items():
                    times, out = timed_process(argv, folder, environ, 1)
                    samples.setdefault(label + what, []).extend(times)
                    if "--json" in argv:
                        assert len(json.loads(out)) == count
        return samples


_READER = """
import sys, time
from pathlib import Path
from runjob_core.store import Store
url = sys.argv[1]
store = Store(url) if url.startswith("postgres") else Store(Path(url.removeprefix("sqlite://")))
last = max([e.id for e in store.events()] or [0])
print("ready", flush=True)
seen = 0
while seen < int(sys.argv[2]):
    for event in store.events(after_id=last):
        last = event.id
        seen += 1
        print(event.message, time.time(), flush=True)
    time.sleep(0.01)
"""


def visibility_ms(kind: str, events: int) -> tuple[list[float], list[float]]:
    """(latencies of a polling reader in another process, ``runjob events --json`` run after each write)."""
    from runjob_core.store import Store

    with state(kind) as (url, folder):
        writer = Store(url) if kind == "postgresql" else Store(Path(url.removeprefix("sqlite://")))
        writer.add_event(None, "note", "start")
        env = {**clean_env(), "RUNJOB_STATE_URL": url, "RUNJOB_HOST": "hostb", "COLUMNS": "200"}
        reader = subprocess.Popen([sys.executable, "-c", _READER, url, str(events)], stdout=subprocess.PIPE, text=True,
                                  env=env)
        assert reader.stdout.readline().strip() == "ready"
        written, seen, cli = {}, {}, []
        for i in range(events):
            time.sleep(0.05)
            writer.add_event(None, "note", f"e{i}")
            written[f"e{i}"] = time.time()  # after its commit
            message, at = reader.stdout.readline().split()
            seen[message] = float(at)
            if i < 5:
                start = time.perf_counter()
                done = subprocess.run([RUNJOB, "events", "--json"], cwd=folder, env=env, capture_output=True, text=True)
                cli.append((time.perf_counter() - start) * 1000)
                assert f"e{i}" in done.stdout, done.stderr
        reader.wait()
        writer.close()
        return [max(0.0, (seen[k] - written[k]) * 1000) for k in written], cli


def line(label: str, samples: list[float]) -> float:
    value = statistics.median(samples)
    print(f"  {label:<60} {value:9.1f} ms  ({min(samples):.1f}-{max(samples):.1f})")
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--status-jobs", type=int, default=10000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--only", default="cycle,status,events", help="sections to run")
    parser.add_argument("--baseline", help="a checkout of another runjob (say main before a change): its `runjob status`"
                        " is timed in turn with this one's")
    args = parser.parse_args()
    only = set(args.only.split(","))

    if "cycle" in only:
        print(f"1. one monitor cycle over {args.jobs} followed jobs (squeue from recorded output), {args.reps} cycles"
              " each, in turn")
        cycles = cycle_ms(args.jobs, args.reps)
        sqlite = line("SQLite", cycles["sqlite"])
        pg = line("PostgreSQL (127.0.0.1, TCP)", cycles["postgresql"])
        print(f"  PostgreSQL / SQLite: {pg / sqlite:.2f}x (target: at most 1.5x)")

    if "status" in only:
        print(f"\n2. runjob status --no-refresh over {args.status_jobs} jobs (a new process each time, in turn)")
        for kind in ("sqlite", "postgresql"):
            for label, samples in status_ms(kind, args.status_jobs, max(3, args.reps // 2), args.baseline).items():
                line(f"{kind}: {label}", samples)
        print("  target: at most 1 s")

    if "events" in only:
        print("\n3. an event written by one process, seen by another (host B)")
        for kind in ("sqlite", "postgresql"):
            polled, cli = visibility_ms(kind, 20)
            line(f"{kind}: a reader polling every 10 ms sees it after", polled)
            line(f"{kind}: runjob events --json on host B, right after", cli)
        print("  target: within 1 s")


if __name__ == "__main__":
    main()
