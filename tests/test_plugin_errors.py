"""One path for plugin errors, in every hook: one line per plugin per command, the traceback
in a file under .runjob/errors named in that line, one event per job per cycle, and after a
bounded number of failing poll cycles the job is marked with what to do. ``runjob forget``
clears a job whose backend is broken; ``health scan`` says "checks incomplete"; the report
lists the errors as anomalies.

The broken backend is ``moduleglobal`` (:mod:`runjob_core.testing.broken`): it keeps its jobs
in a module global, so in any process but the one that submitted, its poll and cancel raise
KeyError, exactly as a third-party backend did in the plugin authors' review.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from runjob_core._plugin_errors import BROKEN_AFTER
from runjob_core.store import Store
from runjob_core.testing import one_line_error, run_cli

DATA = Path(__file__).parent / "data"


@pytest.fixture
def project(runjob_home, monkeypatch):
    paths = [str(DATA / "broken-backends-dist"), str(DATA / "crash-checker-dist")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [*paths, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("XDG_CACHE_HOME", str(runjob_home.parent / "cache"))
    (runjob_home / ".runjob").mkdir()
    (runjob_home / ".runjob" / "clusters.yaml").write_text("clusters:\n  box: {type: moduleglobal}\n")
    (runjob_home / "long.yaml").write_text("name: long\ncluster: box\ncommand: sleep 300\n")
    return runjob_home


def _store(project: Path) -> Store:
    return Store(project / ".runjob" / "state.db")


def _runner_pid(project: Path, job_id: str) -> int:
    store = _store(project)
    try:
        job_dir = store.latest_attempt(job_id).submission.job_dir
    finally:
        store.close()
    return int(Path(job_dir, "pod-pid.1").read_text())


def test_a_broken_poll_cancel_and_checker_each_take_one_path(project):
    submitted = run_cli("submit", "long.yaml", "--yes", cwd=project)
    assert submitted.returncode == 0, submitted.stderr
    store = _store(project)
    job_id = store.list_jobs(limit=1)[0].id
    store.close()
    pid = _runner_pid(project, job_id)
    try:
        # watch, in a new process: the poll raises every cycle. One line, no traceback, and
        # the watch ends after BROKEN_AFTER cycles saying what to do (it used to run forever).
        watched = run_cli("watch", job_id, cwd=project, timeout=120)
        assert "Traceback" not in watched.stderr, watched.stderr
        errors = [line for line in watched.stderr.splitlines() if "plugin_error" in line]
        assert len(errors) == 1, watched.stderr
        shown = re.search(r"traceback in (\S+\.txt)\)", errors[0]).group(1)
        assert "plugin 'moduleglobal' failed in runjob_poll: KeyError" in errors[0]
        assert "KeyError" in (project / shown).read_text() and (project / shown).stat().st_mode & 0o077 == 0
        assert f"runjob forget {job_id}" in watched.stderr
        store = _store(project)
        kinds = [e.kind for e in store.events(job_id, kinds=("plugin_error", "backend_broken"))]
        store.close()
        assert kinds == ["plugin_error"] * BROKEN_AFTER + ["backend_broken"]
        # A later command adds no more events for a job already marked.
        run_cli("status", job_id, cwd=project)
        store = _store(project)
        assert len(store.events(job_id, kinds=("plugin_error",))) == BROKEN_AFTER
        store.close()

        # cancel: the backend's bug is one line (was a raw traceback, no event).
        line = one_line_error(run_cli("cancel", job_id, cwd=project))
        assert "plugin 'moduleglobal' failed in runjob_cancel: KeyError" in line and "traceback in .runjob/errors/" in line
        store = _store(project)
        assert [e.data["hook"] for e in store.events(job_id, kinds=("plugin_error",))][-1] == "runjob_cancel"
        store.close()

        # forget: no backend is asked; recorded as not stopped.
        forgot = run_cli("forget", job_id, cwd=project)
        assert forgot.returncode == 0 and "FORGOTTEN" in forgot.stdout and "did not stop it" in forgot.stdout
        report = json.loads(run_cli("report", job_id, "--json", cwd=project).stdout)
        labels = {(a["label"], a["source"]) for a in report["anomalies"]}
        assert {("plugin_error", "moduleglobal"), ("backend_broken", "moduleglobal"), ("forgotten", "runjob")} <= labels
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_health_scan_with_a_crashing_checker_is_incomplete_not_healthy(project):
    log = project / "job.log"
    log.write_text("step 1\nall good\n")
    result = run_cli("health", "scan", str(log), cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "healthy" not in result.stdout
    assert "Traceback" not in result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert "checks incomplete: plugin 'crashchecker' failed in runjob_check_health: KeyError" in line
    as_json = json.loads(run_cli("health", "scan", str(log), "--json", cwd=project).stdout)
    assert "crashchecker" in as_json[0]["checks_incomplete"][0]
