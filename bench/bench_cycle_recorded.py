"""The Python cost of one monitor cycle over N queued SLURM jobs, on recorded squeue output.

The shared test cluster cannot hold 10,000 queued jobs, so this replays the squeue answer
recorded there (bench/data) for N jobs whose rows are in a real store, and times
``monitor.cycle`` with the remote command costing nothing: what is left is runjob's own
work per cycle (parse, compare, store, views). Beside it: the monitor's RSS and what one
cycle allocates. The ratio to a real squeue needs the real squeue's time at N: pass the one
bench_slurm.py --queued N measured (--raw-ms N=MS); for sizes not measured, the figure is
scaled by the number of lines from the largest measured one and marked "estimated".

Run: .venv/bin/python bench/bench_cycle_recorded.py [--jobs 2000,10000] [--raw-ms 2000=169.3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _recorded_queue import queued_context  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="2000,10000")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--raw-ms", action="append", default=[], help="N=MS: a real squeue's median at N queued jobs")
    args = parser.parse_args()
    raw = {int(k): float(v) for k, v in (item.split("=") for item in args.raw_ms)}
    from runjob_core import monitor

    print("one monitor cycle over N queued jobs, squeue answered from recorded output (Python cost only)")
    for count in [int(n) for n in args.jobs.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            before = rss_mib()
            context, ids, transport = queued_context(Path(tmp), count)
            try:
                first = time.perf_counter()
                monitor.cycle(context, ids)
                first = time.perf_counter() - first
                monitor.cycle(context, ids)
                changes = context.store.generation()
                samples = []
                for _ in range(args.reps):
                    start = time.perf_counter()
                    monitor.cycle(context, ids)
                    samples.append(time.perf_counter() - start)
                writes = context.store.generation()[1] - changes[1]
                tracemalloc.start()
                monitor.cycle(context, ids)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                median = statistics.median(samples) * 1000
                print(f"  N={count:>6}: {median:7.1f} ms per cycle ({min(samples) * 1000:.1f}-{max(samples) * 1000:.1f}), "
                      f"{median * 1000 / count:5.2f} us per job; first cycle {first * 1000:.0f} ms; "
                      f"store rows written by {args.reps} unchanged cycles: {writes}; remote commands per cycle: "
                      f"{len(transport.commands) / (args.reps + 3):.1f}")
                print(f"           memory: RSS {rss_mib():.0f} MiB (+{rss_mib() - before:.1f} MiB for the store and "
                      f"{count} followed jobs); one cycle allocates at most {peak / 2**20:.2f} MiB")
                if raw:
                    known = max(raw)
                    squeue = raw.get(count, raw[known] * count / known)
                    how = "measured" if count in raw else f"estimated from {raw[known]:.1f} ms at {known}"
                    print(f"           vs a real squeue of {squeue:.1f} ms ({how}): "
                          f"{(squeue + median) / squeue:.2f}x (target: at most 1.2x)")
            finally:
                context.close()


if __name__ == "__main__":
    main()
