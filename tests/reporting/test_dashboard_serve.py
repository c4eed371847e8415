"""`runjob dashboard --serve`: served on localhost, rebuilt when the state store changes."""

import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from runjob_core.store import Store
from runjob_core.testing import wait_until

RUNJOB = str(Path(sys.executable).parent / "runjob")


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def test_serve_rebuilds_when_a_job_is_added(runjob_home):
    store = Store(runjob_home / ".runjob" / "state.db")
    store.create_job(name="first-job", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    proc = subprocess.Popen([RUNJOB, "dashboard", "--serve", "--port", "0", "--interval", "0.5"], cwd=runjob_home,
                            stderr=subprocess.PIPE, text=True)
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
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        store.close()
    assert (runjob_home / ".runjob" / "dashboard" / "index.html").exists()
