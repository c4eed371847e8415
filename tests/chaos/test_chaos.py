"""The chaos suite (issue 19, item 9): runjob as an unlucky or hostile user meets it, against
the real SLURM cluster. Every scenario runs a few seeded trials and counts, from the
scheduler's own records and the collected files: duplicate submissions, duplicated or
lost result rows, tracebacks, and jobs recorded wrongly. The figures are printed at the
end of the session (root conftest.py); the goal is 0 in every column but "trials".

Restarting slurmctld and sshd interrupts everyone on the machine for a second or two: those
trials run on CI (a private cluster) or with RUNJOB_CHAOS_RESTARTS=1.
"""

import json
import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runjob_core.testing import wait_until, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.chaos, pytest.mark.slurm, pytest.mark.slow]
RUNJOB = str(Path(sys.executable).parent / "runjob")
REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("RUNJOB_CHAOS_SEED", "19"))
ROWS = 5
#: Writes rows 1..ROWS, skipping those already there (a resumed attempt continues).
JOB = f"""mkdir -p "$RUNJOB_RESULTS"; touch "$RUNJOB_RESULTS/out.jsonl"
for i in $(seq 1 {ROWS}); do
  grep -qx "{{\\"id\\": $i}}" "$RUNJOB_RESULTS/out.jsonl" || echo "{{\\"id\\": $i}}" >> "$RUNJOB_RESULTS/out.jsonl"
  sleep 0.4
done"""
restarts = pytest.mark.skipif(os.environ.get("CI") != "true" and os.environ.get("RUNJOB_CHAOS_RESTARTS") != "1",
                              reason="restarts shared daemons: CI or RUNJOB_CHAOS_RESTARTS=1 only")


def record(scenario: str, **counts: int) -> None:
    controller = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    with open(Path("/tmp") / f"runjob-chaos-tally-{os.getuid()}-{controller}.jsonl", "a") as handle:
        handle.write(json.dumps({"scenario": scenario, **counts}) + "\n")


@pytest.fixture
def home(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    return runjob_home


def start(*args, cwd, env=None):
    return subprocess.Popen([RUNJOB, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200", **(env or {})})


def finish(process, timeout=300) -> tuple[int, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out + err


def write_job(home: Path, name: str, command: str = JOB, **extra) -> str:
    (home / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "cluster": "under-test", "command": command, **extra}))
    return f"{name}.yaml"


def stored_jobs(home: Path, name: str) -> list[dict]:
    db = home / ".runjob" / "state.db"
    if not db.exists():
        return []
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'attempts'").fetchone() is None:
            return []  # runjob has just created the file and not yet its tables
        jobs = [dict(r) for r in con.execute("SELECT id, state FROM jobs WHERE name = ?", (name,))]
        for job in jobs:
            job["attempts"] = [dict(r) for r in con.execute("SELECT n, state, backend_job_id FROM attempts WHERE job_id = ?",
                                                           (job["id"],))]
            job["collected"] = con.execute("SELECT COUNT(*) FROM events WHERE job_id = ? AND kind = 'collected'",
                                           (job["id"],)).fetchone()[0]
    finally:
        con.close()
    return jobs


def scheduler_jobs(slurm_env, name: str) -> list[str]:
    """Every SLURM job called *name* (queued or ended within MinJobAge), as the test user sees them."""
    env = slurm_env
    result = subprocess.run(["ssh", "-p", env["RUNJOB_TEST_SSH_PORT"], "-i", env["RUNJOB_TEST_SSH_KEY"],
                             "-o", f"UserKnownHostsFile={env['RUNJOB_TEST_KNOWN_HOSTS']}", "-o", "BatchMode=yes",
                             f"{env['RUNJOB_TEST_SSH_USER']}@{env['RUNJOB_TEST_SSH_HOST']}",
                             f"squeue -h -t all -n {name} -o %i"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def result_ids(home: Path, name: str) -> list[int]:
    path = home / "results" / name / "out.jsonl"
    return [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []


def judge(scenario: str, home: Path, slurm_env, name: str, outputs: list[str], *, expect_jobs: int = 1) -> list[str]:
    """Count what went wrong in one trial; returns the problems (empty: a clean trial)."""
    jobs = stored_jobs(home, name)
    tracked = sum(len(j["attempts"]) for j in jobs)
    submitted = scheduler_jobs(slurm_env, name)
    ids = result_ids(home, name)
    counts = {
        "duplicate_submissions": max(0, len(submitted) - tracked) + max(0, len(jobs) - expect_jobs),
        "duplicated_rows": len(ids) - len(set(ids)),
        "lost_rows": len(set(range(1, ROWS + 1)) - set(ids)),
        "tracebacks": sum("Traceback" in text for text in outputs),
    }
    problems = [f"{k}={v}" for k, v in counts.items() if v]
    if not jobs or any(j["state"] != "COMPLETED" for j in jobs) or not any(j["collected"] for j in jobs):
        problems.append(f"recorded wrongly: {[(j['state'], j['collected']) for j in jobs]}")
    record(scenario, trials=1, failures=int(bool(problems)), **counts)
    return problems


# ---------------------------------------------------------------------------- kill -9 of runjob run


@pytest.mark.parametrize("scenario, trials", [("plain", 8), ("auto-resume", 4)])
def test_kill_9_of_runjob_run_at_random_points(home, slurm_env, scenario, trials):
    rng = random.Random(f"{SEED}-{scenario}")
    failures = []
    for trial in range(trials):
        name = f"chaos-kill-{trial}-{secrets.token_hex(2)}"
        job_file = write_job(home, name, JOB if scenario == "plain" else RESUMING)
        delay = rng.uniform(0.2, 9.0)  # pre-flight, submit, watch, a resume, after the end, collect, report
        first = start("run", job_file, "--yes", cwd=home)
        time.sleep(delay)
        first.send_signal(signal.SIGKILL)
        finish(first)
        collected_before = any(j["collected"] for j in stored_jobs(home, name))
        code, output = finish(start("run", job_file, "--yes", cwd=home))
        problems = judge(f"kill -9 of runjob run ({scenario})", home, slurm_env, name, [output],
                         expect_jobs=2 if collected_before else 1)
        if code != 0:
            problems.append(f"the rerun exited {code}: {output[-300:]}")
        if problems:
            failures.append((trial, round(delay, 2), problems))
    assert failures == []


# ---------------------------------------------------------------------------- concurrent commands


def test_two_concurrent_runs_of_one_spec(home, slurm_env):
    failures = []
    for trial in range(3):
        name = f"chaos-twin-{trial}-{secrets.token_hex(2)}"
        job_file = write_job(home, name)
        runs = [start("run", job_file, "--yes", cwd=home) for _ in range(2)]
        results = [finish(run) for run in runs]
        problems = judge("two concurrent runs", home, slurm_env, name, [out for _, out in results])
        problems += [f"a run exited {code}" for code, _ in results if code != 0]
        problems += [out[-3000:] for _, out in results if "Traceback" in out]  # seen once on a full run: say what
        if problems:
            failures.append((trial, problems))
    assert failures == []


RESUMING = f"""if [ "$RUNJOB_ATTEMPT" = 1 ]; then
  mkdir -p "$RUNJOB_RESULTS"; echo '{{"id": 1}}' >> "$RUNJOB_RESULTS/out.jsonl"; echo '{{"id": 2}}' >> "$RUNJOB_RESULTS/out.jsonl"
  sleep 1; exit 75
fi
{JOB}"""


def test_two_concurrent_watches_over_an_auto_resume(home, slurm_env):
    failures = []
    for trial in range(2):
        name = f"chaos-resume-{trial}-{secrets.token_hex(2)}"
        job_file = write_job(home, name, RESUMING)
        code, submit_output = finish(start("submit", job_file, "--yes", cwd=home))
        assert code == 0, submit_output
        watches = [start("watch", name, "--interval", "0.3", cwd=home) for _ in range(2)]
        results = [finish(watch) for watch in watches]
        code, collect_output = finish(start("collect", name, cwd=home))
        problems = judge("two watches over an auto-resume", home, slurm_env, name,
                         [out for _, out in results] + [submit_output, collect_output])
        attempts = [len(j["attempts"]) for j in stored_jobs(home, name)]
        if attempts != [2]:
            problems.append(f"attempts {attempts}, expected [2]")
        if problems:
            failures.append((trial, problems))
    assert failures == []


# ---------------------------------------------------------------------------- daemons restarted mid-watch


def _rows_written(slurm_env, home: Path, name: str) -> bool:
    """Whether job *name* has written a row on its node (the cluster's scratch is this machine's)."""
    jobs = Path(slurm_cluster_config(slurm_env).scratch_path) / "jobs" / name
    for job in stored_jobs(home, name):
        out = jobs / job["id"] / "results" / "out.jsonl"
        if out.exists() and out.stat().st_size > 0:
            return True
    return False


def _restart(component: str) -> None:
    subprocess.run(["bash", str(REPO / "scripts" / "test-cluster.sh"), "restart", component], check=True,
                   capture_output=True, timeout=120)


@restarts
@pytest.mark.parametrize("component", ["slurmctld", "sshd"])
def test_a_daemon_restarted_mid_watch(home, slurm_env, component):
    failures = []
    for trial in range(2):
        name = f"chaos-{component}-{trial}-{secrets.token_hex(2)}"
        job_file = write_job(home, name)
        # A direct connection (no shared agent), so that the sshd restart also drops this
        # command's own session and it has to reconnect.
        run = start("run", job_file, "--yes", cwd=home, env={"RUNJOB_SSH_AGENT": "0"})
        wait_until(lambda: any(j["attempts"] and j["attempts"][-1]["backend_job_id"] for j in stored_jobs(home, name)),
                   timeout=120, what="the job to be submitted")
        # Restarted once the job runs on its node: slurmctld killed between allocating a job and
        # sending its launch to slurmd recovers it as RUNNING, the node never starts it, and
        # SLURM 22.05 leaves it so (seen on CI: RUNNING 11 min with no log, time limit UNLIMITED).
        # That is SLURM's window, not what this test is about.
        wait_until(lambda: _rows_written(slurm_env, home, name), timeout=120, what="the job's first row on its node")
        _restart(component)
        if component == "sshd":
            _drop_sessions(run.pid, int(slurm_env["RUNJOB_TEST_SSH_PORT"]))
        code, output = finish(run)
        problems = judge(f"{component} restarted mid-watch", home, slurm_env, name, [output])
        if code != 0:
            problems.append(f"run exited {code}: {output[-300:]}")
        if problems:
            failures.append((trial, problems))
    assert failures == []


def _drop_sessions(client_pid: int, server_port: int) -> None:
    """End the sshd processes serving *client_pid*'s connections (ours only, nobody else's)."""
    inodes = set()
    for fd in Path(f"/proc/{client_pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == server_port:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    # The sshd processes holding the server end of those connections.
    server_inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) in ports:
            server_inodes.add(f"socket:[{fields[9]}]")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == client_pid:
            continue
        try:
            if any(os.readlink(fd) in server_inodes for fd in (entry / "fd").iterdir()):
                os.kill(int(entry.name), signal.SIGTERM)
        except OSError:  # ended meanwhile, or not ours to look at
            continue


# ---------------------------------------------------------------------------- store faults


def test_random_store_damage_is_one_line_never_a_traceback(home, slurm_env):
    """state.db cut at random lengths: every command answers in one line (or works on the
    fresh store that replaced the damaged one), and nothing is submitted twice."""
    rng = random.Random(SEED)
    name = f"chaos-store-{secrets.token_hex(2)}"
    job_file = write_job(home, name)
    code, output = finish(start("run", job_file, "--yes", cwd=home))
    assert code == 0, output
    db = home / ".runjob" / "state.db"
    pristine = db.read_bytes()
    tracebacks, failures = 0, []
    for trial in range(6):
        for extra in ("state.db-wal", "state.db-shm"):
            (home / ".runjob" / extra).unlink(missing_ok=True)
        db.write_bytes(pristine[: rng.randrange(1, len(pristine))])
        for args in (("status",), ("events", name), ("report", name)):
            code, output = finish(start(*args, cwd=home))
            tracebacks += "Traceback" in output
            lines = [line for line in output.splitlines() if line.strip()]
            if code != 0 and len(lines) != 1:
                failures.append((trial, args, output[-300:]))
        for aside in home.joinpath(".runjob").glob("state.db.corrupt-*"):
            aside.unlink()
    record("state.db cut at random", trials=6, failures=len({f[0] for f in failures}), tracebacks=tracebacks)
    assert failures == [] and tracebacks == 0
