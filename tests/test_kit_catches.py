"""The kit catches what ``runjob run`` hits: each backend broken on purpose fails it, naming
the rule it broke, and the same backend without the bug passes the same test.

The backends (:mod:`runjob_core.testing.broken`) are installed through a distribution on
``PYTHONPATH`` (``tests/data/broken-backends-dist``), so the ``runjob`` processes the kit
starts load them as they would a user's plugin. Each case runs the kit's test for its rule
in a pytest process of its own, as a plugin author's test suite would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runjob_core.testing.broken import BROKEN

DIST = Path(__file__).parent / "data" / "broken-backends-dist"
#: The kit test that enforces each rule.
TEST_OF_RULE = {
    "cancel-stops-the-job": "test_cancel_stops_the_job_in_the_backends_world",
    "collect-is-complete": "test_collect_is_complete_file_by_file",
    "paths-with-spaces": "test_paths_with_spaces_and_quotes",
    "separate-processes": "test_steps_run_in_separate_processes",
    "submit-returns": "test_submit_returns_within_seconds",
    "no-false-endings": "test_short_jobs_never_end_lost",
}
_KIT_TEST = '''
import pytest

from runjob_core.models import ClusterConfig
from runjob_core.testing import BackendContract


class TestKit(BackendContract):
    __test__ = True
    backend = {backend!r}
    submit_seconds = 10.0
    cancel_wait = 10.0
    short_jobs = 6

    @pytest.fixture
    def cluster(self):
        return ClusterConfig(name="under-test", type={backend!r})
'''


def run_kit(tmp_path: Path, backend: str, test: str) -> subprocess.CompletedProcess:
    suite = tmp_path / f"suite-{backend}"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["runjob_core.testing"]\n')
    (suite / "test_kit.py").write_text(_KIT_TEST.format(backend=backend))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(DIST), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(suite),
            "--basetemp", str(tmp_path / f"bt-{backend}"), "-k", test, str(suite / "test_kit.py")]
    return subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=900)


def _end_what_runs_from(folder: Path) -> None:
    """A backend whose cancel stops nothing (that is its bug) leaves its job running after the
    kit: end every process started from *folder* (they ran on for hours before)."""
    needle = str(folder).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue  # gone meanwhile, or not ours to read


@pytest.mark.parametrize("backend", sorted(BROKEN))
def test_a_broken_backend_fails_the_kit_naming_the_rule(tmp_path, backend):
    rule = BROKEN[backend]
    try:
        result = run_kit(tmp_path, backend, TEST_OF_RULE[rule])
    finally:
        _end_what_runs_from(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert f"contract rule {rule!r} broken" in output, output[-3000:]


@pytest.mark.parametrize("rule", sorted(TEST_OF_RULE))
def test_the_same_backend_without_the_bug_passes(tmp_path, rule):
    result = run_kit(tmp_path, "spool", TEST_OF_RULE[rule])
    output = result.stdout + result.stderr
    assert result.returncode == 0 and " passed" in output, output[-3000:]
