"""`runjob dashboard --serve`: served on localhost, rebuilt when the state store changes."""

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from runjob_core.store import Store
from runjob_core.testing import wait_until

RUNJOB = str(Path(sys.executable).parent / "runjob")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def _start(runjob_home, env: dict | None = None) -> subprocess.Popen:
    """`runjob dashboard --serve` on a free port, as a terminal's foreground command starts:
    SIGINT at its default (a process started with it ignored, as ``cmd &`` in a script or
    C's ``system()`` leave it, keeps ignoring Ctrl-C, rightly). faulthandler on, so a hang
    can be shown."""
    import os

    return subprocess.Popen([RUNJOB, "dashboard", "--serve", "--port", "0", "--interval", "0.5"], cwd=runjob_home,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {}), "PYTHONFAULTHANDLER": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _stop(proc: subprocess.Popen) -> tuple[int, str]:
    """Ctrl-C, as a terminal sends it: (exit code, stderr). A server that does not stop fails
    the test with its signal masks and every thread's stack (three tests of one xdist worker
    timed out here on full runs, never alone)."""
    proc.send_signal(signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=60)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        masks = [line for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                 if line.startswith(("SigBlk", "SigIgn", "SigCgt", "SigPnd", "ShdPnd", "State"))]
        threads = sorted(p.name for p in Path(f"/proc/{proc.pid}/task").iterdir())
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        _out, err = proc.communicate(timeout=60)
        pytest.fail(f"the dashboard server did not stop on SIGINT within 60 s; {masks}; threads {threads}; "
                    f"stderr: {err}")


def test_serve_rebuilds_when_a_job_is_added(runjob_home):
    store = Store(runjob_home / ".runjob" / "state.db")
    store.create_job(name="first-job", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    proc = _start(runjob_home)
    try:
        url = None
        for line in proc.stderr:
            if line.startswith("serving "):
                url = line.split()[1]
                break
        assert url and url.startswith("http://127.0.0.1:")
        assert "first-job" in fetch(url) and "second-job" not in fetch(url)
        store.create_job(name="second-job", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
        wait_until(lambda: "second-job" in fetch(url), timeout=30, what="the served dashboard to show the new job")
        assert '<meta http-equiv="refresh"' in fetch(url)  # the open page follows the rebuilds
    finally:
        assert _stop(proc)[0] == 0
        store.close()
    assert (runjob_home / ".runjob" / "dashboard" / "index.html").exists()


# ----------------------------------------------------------------------------- a lab's dashboard (issue 27)


def _serving(proc) -> str:
    for line in proc.stderr:
        if line.startswith("serving "):
            return line.split()[1]
    raise AssertionError("the dashboard never said where it serves")


def _status(url: str, headers: dict | None = None) -> tuple[int, dict]:
    import urllib.error

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_serving_beyond_localhost_without_a_token_is_refused_in_one_line(runjob_home):
    from runjob_core.testing import one_line_error, run_cli

    Store(runjob_home / ".runjob" / "state.db").close()
    line = one_line_error(run_cli("dashboard", "--serve", "--host", "0.0.0.0", "--port", "0", cwd=runjob_home))
    assert "--host 0.0.0.0 opens the dashboard" in line and "--token" in line
    short = one_line_error(run_cli("dashboard", "--serve", "--token", "abc", "--port", "0", cwd=runjob_home))
    assert "at least 16 characters" in short


def test_a_token_is_asked_of_every_request_and_given_once(runjob_home):
    import secrets

    token = secrets.token_urlsafe()
    Store(runjob_home / ".runjob" / "state.db").close()
    proc = _start(runjob_home, {"RUNJOB_DASHBOARD_TOKEN": token})
    try:
        url = _serving(proc)
        assert url.startswith("http://127.0.0.1:")
        assert _status(url)[0] == 401
        assert _status(url + "?token=" + "x" * len(token))[0] == 401
        code, headers = _status(url + "?token=" + token)
        assert code == 303 and headers["Location"] == "/index.html"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert _status(url, {"Cookie": cookie})[0] == 200
        assert _status(url, {"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        code, err = _stop(proc)
    assert code == 0 and token not in err


def test_a_shared_state_dashboard_shows_every_members_jobs_and_rebuilds(pg_url, runjob_home, monkeypatch):
    import os

    monkeypatch.setenv("RUNJOB_STATE_URL", pg_url)
    monkeypatch.setenv("RUNJOB_USER", "bob")
    bob = Store(pg_url)
    bob.create_job(name="bobs-job", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    proc = _start(runjob_home, {"RUNJOB_USER": "alice"})
    try:
        url = _serving(proc)
        assert "bobs-job" in fetch(url)
        bob.create_job(name="bobs-second", cluster="local", backend="local", spec_json="{}", spec_hash="h",
                       spec_path=None)
        wait_until(lambda: "bobs-second" in fetch(url), timeout=60, what="the served dashboard to show bob's new job")
    finally:
        assert _stop(proc)[0] == 0
        bob.close()
