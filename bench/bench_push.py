"""The push path on the test cluster (scripts/test-cluster.sh up), against the poll alone.

1. Completion: N jobs of D seconds (staggered by 0.37 s so their ends spread out), followed
   by one monitor as `runjob run` follows (0.5 s first interval, backing off to 30 s). The
   job's command writes `date +%s.%N` as its last act; the figure is runjob's terminal state
   event minus that time (SLURM's own completion included). Target: median <= 2 s.
2. Scheduler load: runjob's own squeue/sacct commands while following them, per followed job
   per minute, and slurmctld's RPC counters (sdiag) before/after. The counters are
   machine-wide: other users of the shared cluster add to them, runjob's own count does not.
3. `runjob logs -f` (a CLI process): a job prints a timestamped line every 2 s; the figure
   is when the line was printed by `logs -f` minus when the job wrote it. Target: <= 1 s.

Each part runs with RUNJOB_WATCH=auto (the push path) and RUNJOB_WATCH=off (the poll alone,
as before). Job names carry this run's id; only those are cancelled at the end.

Run: .venv/bin/python bench/bench_push.py [--jobs 20] [--seconds 20] [--only completion,logs]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runjob_core.testing import write_clusters_yaml
from runjob_slurm.testing import read_cluster_env, slurm_cluster_config

BIN = Path(sys.executable).parent
CTLD = ("REQUEST_JOB_USER_INFO", "REQUEST_JOB_INFO", "REQUEST_PARTITION_INFO", "REQUEST_FED_INFO", "REQUEST_JOB_INFO_SINGLE")


def sdiag_counts(transport) -> dict[str, int]:
    text = transport.run(["sdiag"]).stdout
    counts = {}
    for name in CTLD:
        found = re.search(rf"^\s*{name}\s+\(\s*\d+\)\s+count:(\d+)", text, re.M)
        counts[name] = int(found.group(1)) if found else 0
    return counts


def completion(args, context, cluster_name: str, mode: str, run_id: str) -> dict:
    from runjob_core import lifecycle, monitor
    from runjob_core.config import job_from_mapping

    os.environ["RUNJOB_WATCH"] = mode
    transport = context.transport(context.clusters[cluster_name])
    rows = []
    for i in range(args.jobs):
        seconds = args.seconds + i * 0.37
        command = f'sleep {seconds:.2f}; date +%s.%N > "$RUNJOB_JOB_DIR/command-ended"'
        job = job_from_mapping({"name": f"push-{run_id}-{mode}", "cluster": cluster_name, "command": command},
                               source="bench", base_dir=".")
        rows.append(lifecycle.submit(context, job, context.clusters[cluster_name], new=True))
    before_rpc = sdiag_counts(transport)
    before_commands = len(transport.commands)
    start = time.monotonic()
    monitor.watch(context, [row.id for row, _ in rows], min_interval=0.5, max_interval=30.0)
    minutes = (time.monotonic() - start) / 60
    commands = transport.commands[before_commands:]
    after_rpc = sdiag_counts(transport)
    lags = []
    for row, submission in rows:
        ended = float(transport.read_from(f"{submission.job_dir}/command-ended", 0).decode().strip())
        final = [e for e in context.store.events(row.id, kinds=("state",)) if e.data.get("state") not in ("PENDING", "RUNNING")]
        lags.append(final[-1].ts - ended)
    scheduler = [c for c in commands if re.search(r"\b(squeue|sacct)\b", c)]
    squeues = sum(1 for c in scheduler if "squeue" in c)
    return {
        "mode": mode, "lags": lags, "minutes": minutes, "squeue": squeues, "sacct": len(scheduler) - squeues,
        "rpc": {k: after_rpc[k] - before_rpc[k] for k in CTLD},
        "triggers": sorted({e.data.get("trigger", "?") for row, _ in rows
                            for e in context.store.events(row.id, kinds=("state",)) if e.data.get("state") not in ("PENDING", "RUNNING")}),
    }


def logs_follow(work: Path, env_vars: dict, cluster_name: str, mode: str, run_id: str, lines: int) -> list[float]:
    job_file = work / f"ticks-{mode}.yaml"
    job_file.write_text(f"name: ticks-{run_id}-{mode}\ncluster: {cluster_name}\n"
                        f"command: 'sleep 2; for i in $(seq {lines}); do echo \"tick $(date +%s.%N)\"; sleep 2; done'\n")
    env = {**env_vars, "RUNJOB_WATCH": mode}
    submitted = subprocess.run([str(BIN / "runjob"), "submit", str(job_file), "--yes", "--new", "--json"], cwd=work, env=env,
                               check=True, capture_output=True, text=True)
    job_id = re.search(r"rj-[a-z0-9]+", submitted.stdout + submitted.stderr).group(0)
    follow = subprocess.Popen([str(BIN / "runjob"), "logs", "-f", job_id], cwd=work, env=env, stdout=subprocess.PIPE, text=True)
    lags = []
    for line in follow.stdout:
        if line.startswith("tick "):
            lags.append(time.time() - float(line.split()[1]))
            if len(lags) == lines:
                break
    follow.terminate()
    follow.wait()
    return lags


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--ticks", type=int, default=8)
    parser.add_argument("--only", default="completion,logs")
    parser.add_argument("--modes", default="auto,off")
    args = parser.parse_args()
    only, modes = set(args.only.split(",")), args.modes.split(",")
    run_id = f"{os.getpid():x}"
    env = read_cluster_env()
    cluster = slurm_cluster_config(env, name="bench-push", scratch_path=env["RUNJOB_TEST_SCRATCH"] + "/runjob-bench-push")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_clusters_yaml(work / ".runjob" / "clusters.yaml", [cluster])
        os.chdir(work)
        os.environ["RUNJOB_HOME"] = str(work / ".runjob")
        os.environ["RUNJOB_SSH_AGENT"] = "1"  # as the CLI: one shared connection, the agent runs the watcher
        env_vars = dict(os.environ)
        from runjob_core import lifecycle

        context = lifecycle.open_context()
        transport = context.transport(context.clusters["bench-push"])
        try:
            if "completion" in only:
                print(f"\n1-2. {args.jobs} jobs of {args.seconds:.0f}-{args.seconds + (args.jobs - 1) * 0.37:.0f} s: "
                      "command end -> runjob's terminal state event; scheduler commands while following")
                for mode in modes:
                    result = completion(args, context, "bench-push", mode, run_id)
                    lags = result["lags"]
                    per = args.jobs * result["minutes"]
                    print(f"  RUNJOB_WATCH={mode:<5} median {statistics.median(lags):5.2f} s (min {min(lags):.2f}, max {max(lags):.2f}); "
                          f"noticed by: {', '.join(result['triggers'])}")
                    print(f"      {result['squeue']} squeue + {result['sacct']} sacct in {result['minutes']:.2f} min = "
                          f"{result['squeue'] / per:.3f} squeue per followed job per minute; "
                          f"sdiag (whole cluster): {result['rpc']}")
                print("  target: median <= 2 s; squeue per followed job per minute not above the poll alone's")
            if "logs" in only:
                print(f"\n3. runjob logs -f: a line written by the job -> printed ({args.ticks} lines, one every 2 s)")
                for mode in modes:
                    lags = logs_follow(work, env_vars, "bench-push", mode, run_id, args.ticks)
                    print(f"  RUNJOB_WATCH={mode:<5} median {statistics.median(lags):5.2f} s (min {min(lags):.2f}, max {max(lags):.2f})")
                print("  target: <= 1 s")
        finally:
            user = shlex.quote(env["RUNJOB_TEST_SSH_USER"])
            names = [f"push-{run_id}-{m}" for m in modes] + [f"ticks-{run_id}-{m}" for m in modes]
            transport.run(["sh", "-c", "; ".join(f"scancel -u {user} -n {shlex.quote(n)}" for n in names)])
            context.close()


if __name__ == "__main__":
    main()
