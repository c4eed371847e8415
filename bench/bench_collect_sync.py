"""Benchmark: what a collect waits for to bring the dashboard up to date, with many jobs.

    .venv/bin/python bench/bench_collect_sync.py [--jobs N] [--active N] [--repeat K]

Fills a state store as bench_dashboard.py does (N jobs, a share of them still running),
builds the dashboard once, then times, interleaved, for one job just collected:
  * the sync collect did before ``runjob_collected`` (a new builder's full ``build()``: every
    running job's page rebuilt, then that job's page once more), and
  * the reporting plugin's ``Builder.sync_job()`` (that job's page, the index and clusters
    pages from the kept summaries),
next to the floor of reading every job row with sqlite3. Prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._timing import median_ms, time_interleaved  # noqa: E402
from bench.bench_dashboard import fill  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--active", type=int, default=100, help="jobs whose last attempt is still RUNNING")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from runjob_core.reporting.dashboard import Builder
    from runjob_core.store import Store

    with tempfile.TemporaryDirectory(prefix="runjob-bench-sync-") as tmp:
        work = Path(tmp)
        os.chdir(work)
        store = Store(work / "state.db")
        ids = fill(store, args.jobs, args.events, args.points)
        for job_id in ids[1:args.active + 1]:
            n = store.latest_attempt(job_id).n
            store.update_attempt(job_id, n, state="RUNNING", ended_at=None)
            store.set_job(job_id, state="RUNNING", outcome=None)
        out = work / "site"
        Builder(store, out).build()
        collected = iter(ids[args.active + 1:])

        def before() -> None:  # chain.sync_dashboard before this change
            job_id = next(collected)
            store.add_event(job_id, "collected", "results downloaded", attempt=1)
            builder = Builder(store, out)
            builder.build()
            builder.build_job(job_id)

        def after() -> None:  # the reporting plugin's sync
            job_id = next(collected)
            store.add_event(job_id, "collected", "results downloaded", attempt=1)
            assert Builder(store, out).sync_job(job_id)["rebuilt"] == 1

        def floor() -> None:
            db = sqlite3.connect(work / "state.db")
            db.execute("SELECT * FROM jobs").fetchall()
            db.close()

        old, new, raw = time_interleaved([before, after, floor], args.repeat)
        print(f"{args.jobs} jobs, {args.active} running; medians of {args.repeat}")
        print(f"read every job row with sqlite3 (floor)      {median_ms(raw):8.1f} ms")
        print(f"collect's sync before (full build + page)    {median_ms(old):8.1f} ms  ({median_ms(old) / median_ms(raw):.0f}x the floor)")
        print(f"collect's sync now (runjob_collected, sync_job) {median_ms(new):5.1f} ms  ({median_ms(new) / median_ms(raw):.0f}x the floor)")
        print(f"before / now: {median_ms(old) / median_ms(new):.1f}x")
        store.close()


if __name__ == "__main__":
    main()
