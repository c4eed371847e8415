"""Two hosts sharing one PostgreSQL state (issue 27, item 2): real ``runjob`` processes in two
working folders with two environments (user, host name, HOME), as two lab members would have,
on the local backend. Their jobs run on this machine, so both "hosts" can reach a job's files,
as two login nodes of one cluster reach its shared filesystem.

What is counted: how many times a job's command ran (each run appends a line to a file outside
both folders), the attempts and jobs the state holds, and the ``collected`` events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

RUNJOB = str(Path(sys.executable).parent / "runjob")
TRIALS = 4


class Host:
    """A working folder and the environment of one member on one host."""

    def __init__(self, root: Path, url: str, user: str, host: str) -> None:
        self.folder = root / host
        (self.folder / "home").mkdir(parents=True)
        self.who = f"{user}@{host}"
        self.env = {k: v for k, v in os.environ.items() if k not in ("RUNJOB_HOME",)}
        self.env.update(RUNJOB_STATE_URL=url, RUNJOB_USER=user, RUNJOB_HOST=host, HOME=str(self.folder / "home"),
                        COLUMNS="200")

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([RUNJOB, *args], cwd=self.folder, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([RUNJOB, *args], cwd=self.folder, env=self.env, capture_output=True, text=True,
                              timeout=600)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    def spec(self, name: str, command: str) -> None:
        (self.folder / "job.yaml").write_text(yaml.safe_dump({"name": name, "command": command}))


@pytest.fixture
def hosts(pg_url, tmp_path):
    return Host(tmp_path, pg_url, "alice", "hosta"), Host(tmp_path, pg_url, "bob", "hostb")


def _command(counter: Path, *, resume: bool = False) -> str:
    """Counts each run in *counter*; with *resume*, attempt 1 asks to be resumed (exit 75)."""
    lines = [f'echo "$RUNJOB_ATTEMPT" >> {counter}', 'mkdir -p "$RUNJOB_RESULTS"',
             'echo "{\\"id\\": $RUNJOB_ATTEMPT}" >> "$RUNJOB_RESULTS/out.jsonl"', "sleep 1"]
    if resume:
        lines.append('if [ "$RUNJOB_ATTEMPT" = 1 ]; then exit 75; fi')
    return "\n".join(lines) + "\n"


def _status(host: Host, name: str) -> list[dict]:
    done = host.run("status", "--json", "--all")
    assert done.returncode == 0, done.stderr
    return [job for job in json.loads(done.stdout) if job["name"] == name]


def _events(host: Host, job_id: str, kind: str) -> list[dict]:
    done = host.run("events", job_id, "--json")
    assert done.returncode == 0, done.stderr
    return [e for e in json.loads(done.stdout) if e["kind"] == kind]


def test_submitted_on_one_host_watched_and_collected_on_the_other(hosts, tmp_path):
    a, b = hosts
    a.spec("hello", _command(tmp_path / "ran"))
    submitted = a.run("submit", "job.yaml", "--yes")
    assert submitted.returncode == 0, submitted.stderr
    [job] = _status(b, "hello")  # B sees A's job, and whose it is
    assert job["who"] == a.who
    watched = b.run("watch", "hello")
    assert watched.returncode == 0, watched.stderr
    collected = b.run("collect", "hello")
    assert collected.returncode == 0, collected.stderr
    assert json.loads((b.folder / "results" / "hello" / "out.jsonl").read_text()) == {"id": 1}
    assert not (a.folder / "results").exists()  # collected on the host that collected
    [collected] = _events(a, job["id"], "collected")
    assert collected["who"] == b.who
    assert (tmp_path / "ran").read_text().split() == ["1"]
    # A's report says where B put the results, and reads them where A can reach them (one machine here).
    dest = (b.folder / "results" / "hello").resolve()
    # As Markdown: the terminal's table folds a long path (an xdist worker's tmp_path) inside its cell.
    report = a.run("report", "hello", "--md")
    assert report.returncode == 0, report.stderr
    assert f"1 in hostb:{dest} (collected by bob@hostb)" in report.stdout
    dest.rename(dest.with_name("elsewhere"))  # out of A's reach
    report = a.run("report", "hello", "--md")
    assert f"none here: collected on hostb:{dest} by bob@hostb; `runjob collect {job['id']}` fetches them here" \
        in " ".join(report.stdout.split())


def test_runs_of_one_spec_on_two_hosts_at_once_submit_it_once(hosts, tmp_path):
    a, b = hosts
    duplicates = 0
    for trial in range(TRIALS):
        counter = tmp_path / f"ran-{trial}"
        for host in hosts:
            host.spec(f"race-{trial}", _command(counter))
        runs = [host.start("run", "job.yaml", "--yes") for host in hosts]
        outs = [p.communicate(timeout=600) for p in runs]
        for p, (_out, err) in zip(runs, outs):
            assert p.returncode == 0 and "Traceback" not in err, err
        jobs = _status(a, f"race-{trial}")
        ran = counter.read_text().split()
        duplicates += (len(jobs) - 1) + (len(ran) - 1)
        assert [len(j["attempts"]) for j in jobs] == [1], jobs
        # Each `run` promised results in its own folder: each host collected once, in turn (the collect lease).
        assert sorted(e["who"] for e in _events(a, jobs[0]["id"], "collected")) == [a.who, b.who]
        assert all((h.folder / "results" / f"race-{trial}" / "out.jsonl").exists() for h in hosts)
    assert duplicates == 0


def test_a_run_on_one_host_and_a_watch_on_the_other_resume_and_collect_once(hosts, tmp_path):
    # A runs the job (submit, follow, resume, collect); B watches it meanwhile: the resume after
    # attempt 1's exit 75 and the collect at the end happen once, whoever sees the end first.
    a, b = hosts
    duplicates = 0
    for trial in range(TRIALS):
        counter = tmp_path / f"ran-{trial}"
        a.spec(f"pair-{trial}", _command(counter, resume=True))
        submitted = a.run("submit", "job.yaml", "--yes")
        assert submitted.returncode == 0, submitted.stderr
        watchers = [a.start("run", "job.yaml", "--yes", "--interval", "0.2"),
                    b.start("watch", f"pair-{trial}", "--interval", "0.2")]
        for p in watchers:
            _out, err = p.communicate(timeout=600)
            assert p.returncode == 0 and "Traceback" not in err, err
        [job] = _status(b, f"pair-{trial}")
        ran = counter.read_text().split()
        collected = _events(b, job["id"], "collected")
        duplicates += (len(ran) - 2) + (len(collected) - 1)
        assert ran == ["1", "2"] and [x["state"] for x in job["attempts"]] == ["FAILED", "COMPLETED"], (ran, job)
        assert len(collected) == 1
        assert (a.folder / "results" / f"pair-{trial}").exists() and collected[0]["who"] == a.who
        assert not (b.folder / "results").exists()
    assert duplicates == 0


def test_a_watcher_killed_on_one_host_keeps_its_job_until_its_lease_expires(hosts, tmp_path, pg_url):
    import signal
    import time

    import psycopg

    from runjob_core.testing import wait_until

    a, b = hosts
    gate = tmp_path / "gate"
    a.spec("held", f"while [ ! -e {gate} ]; do sleep 0.2; done\n" + _command(tmp_path / "ran"))
    assert a.run("submit", "job.yaml", "--yes").returncode == 0
    job_id = _status(a, "held")[0]["id"]
    watcher = b.start("watch", "held", "--interval", "0.2")

    def observer():
        with psycopg.connect(pg_url) as conn:
            row = conn.execute("SELECT owner FROM leases WHERE key = %s", (f"observe:{job_id}",)).fetchone()
        return row[0] if row else None

    owner = wait_until(observer, timeout=120, what="B's watch to hold the job")
    assert owner.startswith("hostb:")
    watcher.send_signal(signal.SIGKILL)  # B's host dies: nothing is given back
    watcher.communicate()
    gate.touch()
    once = a.run("watch", "held", "--once")  # A cannot ask B's host whether it lives: B's lease stands
    assert once.returncode == 0, once.stderr
    assert observer() == owner
    with psycopg.connect(pg_url) as conn:  # its expiry passes (instead of waiting the 5 minutes)
        conn.execute("UPDATE leases SET expires_at = %s WHERE owner = %s", (time.time() - 1, owner))
    watched = a.run("watch", "held", "--interval", "0.2")
    assert watched.returncode == 0, watched.stderr
    [job] = _status(a, "held")
    assert [x["state"] for x in job["attempts"]] == ["COMPLETED"]
    assert (tmp_path / "ran").read_text().split() == ["1"]
