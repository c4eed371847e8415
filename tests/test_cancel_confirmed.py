"""Cancel is confirmed in the backend's world; a late cancel keeps the job's own ending;
``--force`` and ``runjob forget`` stop following a job, labelled as stopping nothing.

The backends are :mod:`runjob_core.testing.broken`'s, installed through a distribution on
``PYTHONPATH`` so that ``runjob`` processes load them as a user's plugins.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from runjob_core import lifecycle
from runjob_core.errors import RunjobError
from runjob_core.store import Store
from runjob_core.testing import run_cli, wait_until

DIST = Path(__file__).parent / "data" / "broken-backends-dist"


@pytest.fixture
def project(runjob_home, monkeypatch):
    monkeypatch.syspath_prepend(str(DIST))  # in-process sessions find the backends too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(DIST), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("XDG_CACHE_HOME", str(runjob_home.parent / "cache"))
    (runjob_home / ".runjob").mkdir()
    (runjob_home / ".runjob" / "clusters.yaml").write_text(
        "clusters:\n  box: {type: nocancel}\n  good: {type: spool}\n  here: {type: local}\n")
    (runjob_home / "long.yaml").write_text("name: long\ncluster: box\ncommand: sleep 300\n")
    (runjob_home / "quick.yaml").write_text("name: quick\ncluster: here\ncommand: 'true'\n")
    return runjob_home


def _attempt(project: Path, job_id: str):
    store = Store(project / ".runjob" / "state.db")
    try:
        return store.latest_attempt(job_id)
    finally:
        store.close()


def _submit(project: Path, spec: str) -> str:
    result = run_cli("submit", spec, "--yes", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    store = Store(project / ".runjob" / "state.db")
    try:
        return store.list_jobs(limit=1)[0].id
    finally:
        store.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_cancel_that_stops_nothing_is_not_recorded_cancelled(project):
    job_id = _submit(project, "long.yaml")
    pid = int(_attempt(project, job_id).submission.extra["pid"])
    try:
        result = run_cli("cancel", job_id, "--wait", "3", cwd=project)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
        progress, line = result.stderr.strip().splitlines()  # "cancelling ... waiting", then the error
        assert "cancelling" in progress and "waiting for it to end" in progress
        # The backend's own words, and the ways out.
        assert "has not ended 3 s after nocancel was asked to cancel it (nocancel says RUNNING" in line
        assert f"runjob cancel --force {job_id}" in line and "does NOT stop the job" in line
        assert _alive(pid)
        assert _attempt(project, job_id).state == "CANCELLING"
        # Still active: status keeps polling it, and keeps it CANCELLING while it runs.
        assert run_cli("status", job_id, cwd=project).returncode == 0
        assert _attempt(project, job_id).state == "CANCELLING"
        forced = run_cli("cancel", job_id, "--wait", "1", "--force", cwd=project)
        assert forced.returncode == 0, forced.stderr
        assert "FORGOTTEN" in forced.stdout and "not stopped" in forced.stdout
        assert _attempt(project, job_id).state == "FORGOTTEN"
        assert _alive(pid)  # --force said so: it stopped nothing
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_a_confirmed_cancel_is_cancelled_and_the_process_gone(project):
    (project / "good.yaml").write_text("name: good\ncluster: good\ncommand: sleep 300\n")
    job_id = _submit(project, "good.yaml")
    pid = int(_attempt(project, job_id).submission.extra["pid"])
    result = run_cli("cancel", job_id, cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"{job_id}: CANCELLED (cancelled by the user)" in result.stdout
    assert not _alive(pid)
    assert _attempt(project, job_id).state == "CANCELLED"


def test_a_late_cancel_keeps_the_job_s_own_ending(project):
    # The scheduler had completed the job; runjob had not polled it yet (3 of 8 trials on SLURM
    # were recorded CANCELLED). The kit checks the same on every backend (late-cancel rule).
    context = lifecycle.open_context()
    try:
        job = lifecycle.config.load_job(project / "quick.yaml")
        row, submission = lifecycle.submit(context, job, lifecycle.cluster_for(context, job))
        poll = context.hook("runjob_poll", "local")
        cluster = context.clusters["here"]
        wait_until(lambda: poll(submissions=[submission], cluster=cluster, context=context)[submission.backend_job_id].terminal)
        assert context.store.latest_attempt(row.id).state != "COMPLETED"  # not recorded yet
        lifecycle.cancel(context, context.store.get_job(row.id), wait=30)
        assert context.store.latest_attempt(row.id).state == "COMPLETED"
        assert [e.kind for e in context.store.events(row.id, kinds=("cancel_late", "cancelled"))] == ["cancel_late"]
    finally:
        context.close()


def test_the_api_cancel_is_confirmed_too(project):
    from runjob_core import api

    job_id = _submit(project, "long.yaml")
    pid = int(_attempt(project, job_id).submission.extra["pid"])
    try:
        with api.open() as session:
            started = time.monotonic()
            with pytest.raises(RunjobError, match="has not ended 2 s after nocancel was asked"):
                session.cancel(job_id, wait=2)
            assert time.monotonic() - started >= 2
            assert session.status(job_id).state == "CANCELLING"
            session.cancel(job_id, wait=1, force=True)
            assert session.status(job_id).state == "FORGOTTEN"
    finally:
        os.killpg(pid, signal.SIGKILL)
