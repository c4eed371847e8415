"""Faults of a shared PostgreSQL state in one line (issue 27, item 6), with real servers: one that is
not there, the test server cutting a watch's connection, and a throwaway server of this test's own
(initdb + pg_ctl in a temporary folder, never the shared one) restarted under a running watch.
A watch waits, connects again and loses nothing; nothing is submitted twice."""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
import yaml

from runjob_core.testing import one_line_error, wait_until

RUNJOB = str(Path(sys.executable).parent / "runjob")


def _env(url: str, host: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RUNJOB_HOME"}
    env.update(RUNJOB_STATE_URL=url, RUNJOB_USER="alice", RUNJOB_HOST=host, COLUMNS="200")
    return env


def _runjob(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RUNJOB, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def test_an_unreachable_state_server_is_one_line_naming_it(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://alice:s3cret@127.0.0.1:{port}/lab"
    done = _runjob(tmp_path, _env(url, "hosta"), "status")
    line = one_line_error(done)
    assert f"PostgreSQL at postgresql://alice@127.0.0.1:{port}/lab cannot be reached" in line
    assert "check the server is up" in line and "s3cret" not in done.stderr + done.stdout


# ----------------------------------------------------------------------------- a watch under a cut


def _gated_job(folder: Path, gate: Path, counter: Path) -> None:
    command = (f'echo "$RUNJOB_ATTEMPT" >> {counter}\n'
               f"for i in $(seq 1 30); do echo line $i; if [ $i = 10 ]; then while [ ! -e {gate} ]; do sleep 0.1; done; fi;"
               " sleep 0.05; done\n")
    (folder / "job.yaml").write_text(yaml.safe_dump({"name": "cut", "command": command}))


def _watch_through(url: str, folder: Path, cut) -> tuple[str, dict]:
    """Submit the gated job, watch it from another host, *cut(watch)* once the watch holds it,
    open the gate; returns the watch's stderr and the job's status."""
    folder.mkdir(exist_ok=True)
    gate, counter = folder / "gate", folder / "ran"
    _gated_job(folder, gate, counter)
    a, b = _env(url, "hosta"), _env(url, "hostb")
    submitted = _runjob(folder, a, "submit", "job.yaml", "--yes")
    assert submitted.returncode == 0, submitted.stderr
    watch = subprocess.Popen([RUNJOB, "watch", "cut", "--interval", "0.2", "--max-interval", "2"], cwd=folder, env=b,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def observed():
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT owner FROM leases WHERE key LIKE 'observe:%' AND owner LIKE 'hostb:%'").fetchone()

    wait_until(observed, timeout=120, what="the watch to hold the job")
    cut(watch)
    gate.touch()
    _out, err = watch.communicate(timeout=600)
    assert watch.returncode == 0, err
    assert "Traceback" not in err
    [job] = json.loads(_runjob(folder, a, "status", "cut", "--json").stdout)
    assert [x["state"] for x in job["attempts"]] == ["COMPLETED"]  # submitted once, followed to its end
    assert counter.read_text().split() == ["1"]
    # Every log line was read: the stored offset is the whole log.
    [log] = glob.glob(str(folder / ".runjob" / "scratch" / "logs" / "cut.*.1.out"))
    with psycopg.connect(url) as conn:
        offset = conn.execute("SELECT \"offset\" FROM log_offsets WHERE job_id = %s AND stream = 'log'",
                              (job["id"],)).fetchone()[0]
    assert offset == os.path.getsize(log)
    return err, job


def test_a_watch_whose_connection_is_cut_connects_again_and_loses_nothing(pg_url, tmp_path):
    def cut(watch):
        with psycopg.connect(pg_url, autocommit=True) as conn:
            killed = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                                  (f"runjob alice@hostb pid {watch.pid}",)).fetchall()
        assert killed == [(True,)]

    err, _job = _watch_through(pg_url, tmp_path / "work", cut)
    lines = [line for line in err.splitlines() if "PostgreSQL" in line]
    assert lines and all(line.startswith("warning: lost the connection to PostgreSQL at postgresql://runjob_test@")
                         for line in lines), err
    assert "retrying in" in lines[0]


# ----------------------------------------------------------------------------- a server restarted


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[-2].split(".")])
    if not found or os.geteuid() != 0:
        pytest.skip("needs root and Debian's postgresql package (a throwaway server of the test's own)")
    return Path(found[-1])


@pytest.fixture
def own_server():
    """A throwaway PostgreSQL server in a temporary folder on a free port (trust, 127.0.0.1 only), run
    as the postgres user as scripts/test-cluster.sh runs the shared one; stopped and removed after."""
    bin_dir = _pg_bin()
    folder = Path(tempfile.mkdtemp(prefix="runjob-pg-"))
    shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E",
                    "UTF8"], check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"

    def ctl(*args: str) -> None:
        subprocess.run([*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w",
                        "-t", "60", *args], check=True, capture_output=True)

    ctl("-o", options, "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", lambda: ctl("-m", "fast", "-o", options, "restart")
    finally:
        subprocess.run([*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_watch_outlives_its_server_restarting(own_server, tmp_path):
    url, restart = own_server
    err, _job = _watch_through(url, tmp_path / "work", lambda watch: restart())
    lines = [line for line in err.splitlines() if "PostgreSQL" in line]
    assert lines and all(line.startswith("warning: ") and "retrying in" in line for line in lines), err
    assert f"PostgreSQL at {url}" in lines[0]


def test_a_read_only_server_is_one_line_naming_the_fix(own_server, tmp_path):
    url, _restart = own_server
    env = _env(url, "hosta")
    assert _runjob(tmp_path, env, "status").returncode == 0  # the state is made while it can be written
    with psycopg.connect(url, autocommit=True) as conn:  # as a hot-standby replica answers
        conn.execute("ALTER DATABASE postgres SET default_transaction_read_only = on")
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({"name": "ro", "command": "true"}))
    line = one_line_error(_runjob(tmp_path, env, "submit", "job.yaml", "--yes"))
    assert line == (f"Error: PostgreSQL at {url} is read-only (a replica, or default_transaction_read_only): "
                    "point RUNJOB_STATE_URL at the primary server")
