"""The warm path (runjob_core.warm): commands run in a forked child of a warm process,
on the caller's own stdin/stdout/stderr, folder and environment, with its exit code; a
stale warm process is never used. Everything goes through the installed ``runjob`` command."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from runjob_core import warm as _warm
from runjob_core.testing import one_line_error, run_cli, wait_until


@pytest.fixture
def warm_env(tmp_path: Path):
    """A private socket folder (so this test's warm process is its own) and the warm path on."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    env = {"RUNJOB_WARM": "1", "XDG_RUNTIME_DIR": str(run), "RUNJOB_WARM_IDLE": "120"}
    yield env
    for log in (run / "runjob" / "warm").glob("*.sock.log"):
        match = re.match(r"warm process (\d+) ", log.read_text())
        if match:
            try:
                os.kill(int(match.group(1)), signal.SIGTERM)  # the warm process this test started
            except ProcessLookupError:
                pass  # it found itself stale and ended already


def _log(env: dict) -> Path:
    [log] = (Path(env["XDG_RUNTIME_DIR"]) / "runjob" / "warm").glob("*.sock.log")
    return log


def _served(env: dict) -> list[str]:
    return re.findall(r"^served (\S+) in child \d+$", _log(env).read_text(), re.M)


def _start(env: dict, cwd: Path) -> None:
    first = run_cli("status", cwd=cwd, env={**env, "RUNJOB_HOME": str(cwd / ".runjob")})
    assert first.returncode == 0, first.stderr
    folder = Path(env["XDG_RUNTIME_DIR"]) / "runjob" / "warm"
    wait_until(lambda: list(folder.glob("*.sock")) and "serving" in _log(env).read_text(), what="the warm process")
    assert _served(env) == []  # the first command ran itself: there was no warm process yet


@pytest.mark.serial  # timed out waiting for the warm process inside the parallel CI run: see ./dev
def test_commands_run_in_the_warm_process_with_the_callers_folder_environment_and_output(tmp_path, warm_env):
    one, two = tmp_path / "one", tmp_path / "two"
    for work in (one, two):
        work.mkdir()
        (work / "job.yaml").write_text(f"name: job-{work.name}\ncommand: 'echo hello from {work.name}'\n")
    _start(warm_env, one)

    submitted = run_cli("submit", "job.yaml", "--yes", cwd=one, env={**warm_env, "RUNJOB_HOME": str(one / ".runjob")})
    assert submitted.returncode == 0, submitted.stderr
    assert re.fullmatch(r"rj-\S+ local-\d+\n", submitted.stdout)  # stdout: the document alone
    assert "submitted" in submitted.stderr and "job-one" in submitted.stderr  # events: stderr
    assert _served(warm_env) == ["submit"]

    # Another folder and state, the same warm process: each command sees its caller's own.
    listed = run_cli("status", "--json", cwd=two, env={**warm_env, "RUNJOB_HOME": str(two / ".runjob")})
    assert listed.returncode == 0 and listed.stdout.strip() == "[]", listed.stdout
    shown = run_cli("status", "job-one", "--json", cwd=one, env={**warm_env, "RUNJOB_HOME": str(one / ".runjob")})
    assert '"name": "job-one"' in shown.stdout
    assert _served(warm_env) == ["submit", "status", "status"]

    # A failure keeps its exit code and its one line on stderr.
    missing = run_cli("status", "nope", cwd=two, env={**warm_env, "RUNJOB_HOME": str(two / ".runjob")})
    assert "no job with id or name 'nope'" in one_line_error(missing)
    assert missing.returncode == 1
    assert _served(warm_env)[-1] == "status"


@pytest.mark.serial  # timed out waiting for the warm process inside the parallel CI run: see ./dev
def test_a_warm_process_whose_code_changed_on_disk_is_not_used(tmp_path, warm_env):
    # A folder on the import path stands for the installed code: a change there (an edit,
    # an upgrade, a plugin installed) makes the warm process stale.
    code = tmp_path / "code"
    code.mkdir()
    env = {**warm_env, "PYTHONPATH": str(code)}
    work = tmp_path / "work"
    work.mkdir()
    _start(env, work)
    stale_pid = int(re.match(r"warm process (\d+) ", _log(env).read_text()).group(1))
    assert run_cli("status", cwd=work, env={**env, "RUNJOB_HOME": str(work / ".runjob")}).returncode == 0
    assert _served(env) == ["status"]

    (code / "new_plugin.py").write_text("")
    again = run_cli("status", "--json", cwd=work, env={**env, "RUNJOB_HOME": str(work / ".runjob")})
    assert again.returncode == 0 and again.stdout.strip() == "[]"  # ran in its own process, as before
    wait_until(lambda: not Path(f"/proc/{stale_pid}").exists() or "zombie" in _proc_state(stale_pid), what="the stale warm process to end")


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "zombie"


@pytest.mark.parametrize(("argv", "tty", "expected"), [
    (["status"], True, "status"),
    (["status", "--json"], False, "status"),
    (["submit", "job.yaml", "--yes"], True, "submit"),
    (["submit", "job.yaml", "-y"], True, "submit"),
    (["submit", "job.yaml"], False, "submit"),   # no terminal: the review refuses without asking
    (["submit", "job.yaml"], True, None),        # would prompt: the child cannot read the terminal
    (["run", "job.yaml", "--yes"], False, None),  # long-running commands stay in the caller's process
    (["--version"], False, None),
    ([], False, None),
])
def test_only_commands_that_never_read_the_terminal_go_the_warm_way(monkeypatch, argv, tty, expected):
    monkeypatch.setattr(os, "isatty", lambda fd: tty)
    assert _warm.command_of(argv) == expected


def test_the_warm_path_is_off_with_runjob_warm_0():
    assert not _warm.enabled({"RUNJOB_WARM": "0"})
    assert _warm.enabled({}) == hasattr(os, "fork")


def test_the_socket_folder_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "runjob" / "warm").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "runjob" / "warm", 0o755)
    folder = _warm.folder()
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert _warm.socket_path() == os.path.join(folder, f"{_warm.key()}.sock")
