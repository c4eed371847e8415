"""A sweep from Python: one job file, several parameter values, one table at the end.

    python3 examples/sweep.py            # in a folder where `runjob init` ran

Each point is the hello job with another number of questions, under its own name (a
name is a job's identity: the same name and spec already running is followed, not
submitted twice). The same gate as `runjob submit` runs for every point.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from runjob_core import api

HERE = Path(__file__).resolve().parent


def main(points=(5, 10, 20)) -> int:
    base = api.load_job(HERE / "hello.yaml")
    with api.open() as rj:
        jobs = [rj.submit(api.variant(base, name=f"hello-q{n}", params={"questions": n})) for n in points]
        states = rj.wait(jobs)
        print(f"{'job':<12} {'state':<10} {'rows':>5} {'mean score':>10}")
        failed, means = 0, []
        for state in states:
            scores = []
            if state.ok:
                collected = rj.collect(state)
                failed += not collected.ok
                with open(collected.dest / "results.jsonl") as handle:
                    scores = [json.loads(line)["score"] for line in handle if line.strip()]
            else:
                failed += 1
            mean = statistics.mean(scores) if scores else None
            means += [mean] if mean is not None else []
            shown = f"{mean:.3f}" if mean is not None else "-"
            print(f"{state.name:<12} {state.state:<10} {len(scores):>5} {shown:>10}")
        if means:
            print(f"mean over {len(means)} points: {statistics.mean(means):.3f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
