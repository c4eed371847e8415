"""The opt-in test kit for runjob and its plugins (``pytest_plugins = ["runjob_core.testing"]``).

Fixtures:

* ``runjob_home``: a fresh working directory with its own state store, and no clusters
  file from the user's environment;
* ``runjob_pm``: a fresh plugin manager with the core's defaults only, plus
  ``register(plugin, name)`` that unregisters after the test;
* ``fake_run``: replaces :data:`runjob_core.transport.execute.RUNNER`, records every argv and
  answers from a script (``fake_run.on(["sbatch", ...], stdout="42\\n")``);
* ``runjob_cli``: runs the ``runjob`` CLI in-process and returns click's result;
* ``pg_url``, ``state``: a state of the test's own on PostgreSQL, and one on each backend
  (SQLite, then PostgreSQL: :mod:`runjob_core.testing._state`);

The SLURM test cluster's fixtures (``slurm_env``, ``slurm_cluster_config``) are the SLURM
plugin's: :mod:`runjob_slurm.testing`.

:class:`BackendContract` is the contract every backend's tests subclass.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from runjob_core.transport import execute
from runjob_core.testing._helpers import one_line_error, run_cli, wait_until, write_clusters_yaml  # noqa: F401 - the kit's API
from runjob_core.testing.contract import BackendContract  # noqa: F401 - the kit's API
from runjob_core.testing._state import State, pg_settings, pg_url, state  # noqa: F401 - the kit's fixtures


@pytest.fixture
def runjob_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("RUNJOB_HOME", raising=False)
    monkeypatch.delenv("RUNJOB_CLUSTERS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return work


class _PluginRegistry:
    def __init__(self, pm) -> None:
        self.pm = pm
        self._added: list[Any] = []

    def register(self, plugin: Any, name: str) -> None:
        self.pm.register(plugin, name=name)
        self.pm.check_pending()
        self._added.append(plugin)

    def undo(self) -> None:
        for plugin in self._added:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)


@pytest.fixture
def runjob_pm() -> Iterator[Any]:
    from runjob_core.plugins import get_plugin_manager

    pm, _infos = get_plugin_manager(load_entrypoints=False)
    registry = _PluginRegistry(pm)
    pm.register_for_test = registry.register  # type: ignore[attr-defined]
    yield pm
    registry.undo()


class FakeRunner:
    """Records commands and answers them from a script of (argv prefix, result) pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self._script: list[tuple[tuple[str, ...], execute.Completed]] = []
        self.passthrough = False

    def on(self, prefix: Sequence[str], *, stdout: str = "", stderr: str = "", returncode: int = 0) -> None:
        self._script.append((tuple(prefix), execute.Completed(tuple(prefix), returncode, stdout, stderr)))

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> execute.Completed:
        argv = tuple(str(a) for a in argv)
        self.calls.append(argv)
        for prefix, result in self._script:
            if argv[: len(prefix)] == prefix:
                return execute.Completed(argv, result.returncode, result.stdout, result.stderr, result.pid)
        if self.passthrough:
            return execute._spawn(argv, **kwargs)
        raise AssertionError(f"unexpected command: {shlex.join(argv)}")


@pytest.fixture
def fake_run(monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    runner = FakeRunner()
    monkeypatch.setattr(execute, "RUNNER", runner)
    return runner


@pytest.fixture
def runjob_cli() -> Callable[..., Any]:
    from click.testing import CliRunner

    from runjob_core.cli import cli

    def invoke(*args: str, input: str | None = None) -> Any:
        return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


@contextlib.contextmanager
def cpu_load(processes: int = 2) -> Iterator[None]:
    """Busy-looping processes for the duration (a loaded machine delays every read, which is
    when races between reads show); niced, so the machine stays usable for others."""
    import subprocess
    import sys

    busy = [subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()

