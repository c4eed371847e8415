"""A job the scheduler shows RUNNING whose log never got a line (the node never started it:
SLURM 22.05 does this when slurmctld restarts between allocating a job and launching it) is
named once, with how to check it and what to do; runjob cancels nothing by itself.

The backend is :mod:`runjob_core.testing.broken`'s correct ``spool`` (real detached processes),
installed through a distribution on ``PYTHONPATH`` as a user's plugin would be. The lost launch
is made by removing the job's log before any cycle read it; the five minutes by moving the
attempt's start back in the store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import pytest

from runjob_core.monitor import observe
from runjob_core.store import Store
from runjob_core.testing import run_cli

DIST = Path(__file__).parent / "data" / "broken-backends-dist"


@pytest.fixture
def project(runjob_home, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(DIST), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("XDG_CACHE_HOME", str(runjob_home.parent / "cache"))
    (runjob_home / ".runjob").mkdir()
    (runjob_home / ".runjob" / "clusters.yaml").write_text("clusters:\n  good: {type: spool}\n")
    (runjob_home / "long.yaml").write_text("name: long\ncluster: good\ncommand: sleep 300\n")
    return runjob_home


def _events(project: Path, job_id: str) -> list[dict]:
    result = run_cli("events", job_id, "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    return [e for e in json.loads(result.stdout) if e["kind"] == "never_started"]


@contextlib.contextmanager
def _long_job(project: Path):
    """A submitted `sleep 300` job: (its store, id, first attempt); its processes end after."""
    result = run_cli("submit", "long.yaml", "--yes", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    store = Store(project / ".runjob" / "state.db")
    job_id = store.list_jobs(limit=1)[0].id
    try:
        yield store, job_id, store.latest_attempt(job_id)
    finally:
        pid = int(store.latest_attempt(job_id).submission.extra["pid"])
        store.close()
        os.killpg(pid, signal.SIGKILL)


def test_a_running_job_without_one_log_line_is_named_once(project):
    with _long_job(project) as (store, job_id, attempt):
        Path(attempt.submission.log_path).unlink()  # its node "never wrote" it
        assert run_cli("status", job_id, cwd=project).returncode == 0  # RUNNING, started just now: nothing to say
        assert store.latest_attempt(job_id).state == "RUNNING" and _events(project, job_id) == []
        store.update_attempt(job_id, attempt.n, started_at=time.time() - observe.NEVER_STARTED_SECONDS - 60)
        for _ in range(2):  # said once, not every cycle
            assert run_cli("status", job_id, cwd=project).returncode == 0
        [event] = _events(project, job_id)
        assert "shown it RUNNING for 6 min, but its log has not one line" in event["message"], event
        assert f"runjob cancel {job_id} && runjob resume {job_id}" in event["message"]
        assert store.latest_attempt(job_id).state == "RUNNING"  # nothing cancelled


def test_a_job_whose_log_has_lines_is_never_named(project):
    with _long_job(project) as (store, job_id, attempt):
        log = Path(attempt.submission.log_path)
        for _ in range(200):  # its start line (the job script writes it first)
            if log.exists() and log.read_bytes().endswith(b"\n"):
                break
            time.sleep(0.05)
        assert run_cli("status", job_id, cwd=project).returncode == 0  # reads the start line
        store.update_attempt(job_id, attempt.n, started_at=time.time() - observe.NEVER_STARTED_SECONDS - 60)
        assert run_cli("status", job_id, cwd=project).returncode == 0
        assert _events(project, job_id) == []
