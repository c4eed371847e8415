"""Benchmark: build the dashboard for 1,000 jobs with 10,000 events and 100,000 metric points.

    .venv/bin/python bench/bench_dashboard.py [--jobs N] [--events N] [--points N] [--repeat K]

Fills a fresh state store (jobs with 1-3 attempts, a quarter of them canaries, findings,
resumes, metric curves across attempts), then times ``Builder.build()``: a cold build (new
builder) and a warm rebuild (the same builder, as ``--serve`` and collect keep it), next to
the raw floor of reading the same rows out of SQLite, and the sync after one job's collect
(a new builder: only the job that changed is built again). Target: a cold build <= 2 s, or
a collect's sync that does not wait for a full rebuild (the machine is shared: compare the
ratio to the floor between runs, not only the seconds).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._timing import median_ms, time_call  # noqa: E402


def fill(store, jobs: int, events: int, points: int) -> list[str]:
    from runjob_core import config

    rng = random.Random(7)
    ids = []
    spec = config.job_to_json(config.job_from_mapping({"name": "x", "command": "python train.py", "resources": {"gpus": 8}},
                                                      source="x.yaml", base_dir="."))
    base = time.time() - 86400 * 30
    for j in range(jobs):
        kind = "canary" if j % 4 == 0 else "full"
        job_id = store.create_job(name=f"sweep-{j:04d}", cluster=f"cluster{j % 3}", backend="local", spec_json=spec,
                                  spec_hash="h", spec_path="x.yaml", kind=kind)
        ids.append(job_id)
        start = base + j * 2000
        n_attempts = 1 + j % 3
        for n in range(1, n_attempts + 1):
            store.begin_attempt(job_id)
            store.record_submission(job_id, n, "{}", f"{1000 + j}_{n}", start)
            state = "COMPLETED" if n == n_attempts and j % 5 else ("TIMEOUT" if n < n_attempts else "FAILED")
            store.update_attempt(job_id, n, state=state, started_at=start + 10, ended_at=start + 1800, step=n * 100)
            start += 1900
    per_job_events = events // jobs
    per_job_points = points // jobs
    kinds = ("state", "finding", "resuming", "artifact", "collected", "submitted")
    for j, job_id in enumerate(ids):
        for e in range(per_job_events):
            kind = kinds[e % len(kinds)]
            store.add_event(job_id, kind, f"event {e} of {job_id} <b>not bold</b>", attempt=1,
                            data={"label": "nan_loss", "severity": "warning"} if kind == "finding" else None)
        n_attempts = 1 + j % 3
        series = [("loss", 0.6), ("reward", 0.4)]
        batch = []
        for name, share in series:
            count = int(per_job_points * share)
            for i in range(count):
                attempt = 1 + i * n_attempts // count
                batch.append((attempt, (name, float(i), base + i, 2.0 / (1 + i) + rng.random() * 0.01)))
        for attempt in range(1, n_attempts + 1):
            store.add_metrics(job_id, attempt, [p for a, p in batch if a == attempt], source="job")
    return ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from runjob_core.reporting.dashboard import Builder
    from runjob_core.store import Store

    with tempfile.TemporaryDirectory(prefix="runjob-bench-dashboard-") as tmp:
        work = Path(tmp)
        import os

        os.chdir(work)  # results folders (none here) are looked up relative to the working folder
        store = Store(work / "state.db")
        t0 = time.perf_counter()
        ids = fill(store, args.jobs, args.events, args.points)
        print(f"filled {args.jobs} jobs, {args.events} events, {args.points} metric points in {time.perf_counter() - t0:.1f} s")

        def raw() -> None:
            db = sqlite3.connect(work / "state.db")
            for table in ("jobs", "attempts", "events", "artifacts", "metrics"):
                db.execute(f"SELECT * FROM {table}").fetchall()
            db.close()

        runs = iter(range(10**6))

        def cold() -> None:  # a new builder into an empty folder: every page written
            Builder(store, work / f"cold-{next(runs)}").build()

        warm_builder = Builder(store, work / "site")
        warm_builder.build()
        cpu = []
        for _ in range(args.repeat):  # CPU seconds: what the build costs when the machine is not shared
            c0 = time.process_time()
            cold()
            cpu.append(time.process_time() - c0)
        floor = time_call(raw, args.repeat)
        cold_s = time_call(cold, args.repeat)
        warm_s = time_call(warm_builder.build, args.repeat)
        collected = iter(ids[::max(1, len(ids) // 50)])

        def after_collect() -> None:
            # What a collect does: one job gets its events, then a new builder syncs the site.
            job_id = next(collected)
            store.add_event(job_id, "collected", "results downloaded", attempt=1)
            built = Builder(store, work / "site").build()
            assert built["rebuilt"] == 1, built

        sync_s = time_call(after_collect, args.repeat)
        pages = len(list((work / "site").glob("*.html")))
        size = sum(p.stat().st_size for p in (work / "site").iterdir()) / 1e6
        print(f"\nread every row with sqlite3 (floor) {median_ms(floor):8.0f} ms")
        print(f"dashboard build, cold (empty folder){median_ms(cold_s):8.0f} ms  ({median_ms(cold_s) / median_ms(floor):.1f}x the floor)")
        print(f"rebuild, nothing changed            {median_ms(warm_s):8.0f} ms  ({median_ms(warm_s) / median_ms(floor):.1f}x the floor)")
        print(f"sync after one job's collect        {median_ms(sync_s):8.0f} ms  (a new builder, as collect runs it: "
              f"only that job rebuilt; target <= 2000 ms: {'met' if median_ms(sync_s) <= 2000 else 'NOT met'})")
        print(f"cold build, CPU time of this process {median_ms(cpu):8.0f} ms  (the wall time above includes waiting for a "
              "shared CPU)")
        print(f"{pages} pages, {size:.1f} MB; target cold build <= 2000 ms: wall {median_ms(cold_s):.0f} ms "
              f"({'met' if median_ms(cold_s) <= 2000 else 'NOT met'}), CPU {median_ms(cpu):.0f} ms "
              f"({'met' if median_ms(cpu) <= 2000 else 'NOT met'})")
        store.close()


if __name__ == "__main__":
    main()
