"""A broken state store gives one line (issue 19, item 6), and `watch` outlives a full disk.

Real faults: a truncated file, a read-only mount and a full tmpfs, each mounted for the
test and removed after it (needs root; skipped elsewhere).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runjob_core.testing import one_line_error, run_cli as runjob

RUNJOB = str(Path(sys.executable).parent / "runjob")

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (needs root)")


@pytest.fixture
def tmpfs(tmp_path):
    """A 2 MiB tmpfs at tmp_path/mnt, unmounted after the test."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)  # until ENOSPC
    return filler


def submit_hello(home: Path, env=None, command="echo hello"):
    (home / "job.yaml").write_text(yaml.safe_dump({"name": "hello", "command": command}))
    return runjob("submit", "job.yaml", "--yes", cwd=home, env=env)


def test_a_truncated_store_is_kept_aside_with_how_to_recover(runjob_home):
    assert submit_hello(runjob_home).returncode == 0
    db = runjob_home / ".runjob" / "state.db"
    runjob("status", cwd=runjob_home)  # checkpoints the WAL into state.db
    for extra in ("state.db-wal", "state.db-shm"):
        (runjob_home / ".runjob" / extra).unlink(missing_ok=True)
    db.write_bytes(db.read_bytes()[:1500])
    line = one_line_error(runjob("status", cwd=runjob_home))
    assert str(db) in line and "kept aside" in line and "can still be read" in line
    aside = [p for p in db.parent.iterdir() if p.name.startswith("state.db.corrupt-") and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].stat().st_size == 1500
    assert runjob("status", cwd=runjob_home).returncode == 0  # a fresh store from here on


@needs_root
def scratch_elsewhere(home: Path) -> None:
    """The local jobs' files off the store's disk: only the store is read-only or full."""
    clusters = home / ".runjob" / "clusters.yaml"
    clusters.parent.mkdir(exist_ok=True)
    clusters.write_text(yaml.safe_dump({"clusters": {"local": {"type": "local", "scratch_path": str(home / "scratch")}}}))


def test_a_read_only_store_is_one_line(runjob_home, tmpfs):
    env = {"RUNJOB_HOME": str(tmpfs)}
    scratch_elsewhere(runjob_home)  # (a job still writing its log there would make the remount fail: busy)
    assert submit_hello(runjob_home, env).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    line = one_line_error(submit_hello(runjob_home, env, command="echo other"))
    assert str(tmpfs / "state.db") in line and "writable" in line


@needs_root
def test_a_full_disk_under_the_store_is_one_line(runjob_home, tmpfs):
    env = {"RUNJOB_HOME": str(tmpfs)}
    assert submit_hello(runjob_home, env).returncode == 0
    fill(tmpfs)
    result = runjob("run", "job.yaml", "--yes", "--new", cwd=runjob_home, env=env)
    line = one_line_error(result)
    assert "full" in line and str(tmpfs / "state.db") in line


@needs_root
def test_watch_survives_a_transient_full_disk_and_loses_nothing(runjob_home, tmpfs):
    import json
    import sqlite3

    env = {"RUNJOB_HOME": str(tmpfs)}
    scratch_elsewhere(runjob_home)
    command = "for i in $(seq 1 40); do echo line $i; sleep 0.2; done"
    assert submit_hello(runjob_home, env, command=command).returncode == 0
    watch = subprocess.Popen([RUNJOB, "watch", "hello", "--interval", "0.2", "--max-interval", "1"], cwd=runjob_home,
                             env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    filler = fill(tmpfs)
    time.sleep(4)  # the job goes on writing; the monitor cannot record anything meanwhile
    filler.unlink()
    _out, err = watch.communicate(timeout=120)
    assert watch.returncode == 0, err
    assert "Traceback" not in err
    assert "full" in err  # it said so, and went on
    [job] = json.loads(runjob("status", "hello", "--json", cwd=runjob_home, env=env).stdout)
    assert job["state"] == "COMPLETED"
    # Every log line was read and accounted for: the offset is the whole log.
    [log] = (runjob_home / "scratch" / "logs").glob("hello.*.1.out")
    offset = sqlite3.connect(tmpfs / "state.db").execute("SELECT offset FROM log_offsets").fetchone()[0]
    assert offset == log.stat().st_size
