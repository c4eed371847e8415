"""The warm path (runjob_core.warm): commands run in a forked child of a warm process,
on the caller's own stdin/stdout/stderr, folder and environment, with its exit code; a
stale warm process is never used. Everything goes through the installed ``runjob`` command."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from runjob_core import warm as _warm
from runjob_core.testing import one_line_error, run_cli, wait_until


@pytest.fixture
def warm_env():
    """A private socket folder (so this test's warm process is its own) and the warm path on.

    Short, not under tmp_path: a socket folder whose path is over runjob_core.warm's 80
    characters is replaced by the shared /tmp/runjob-warm-UID, and pytest-xdist's tmp_path
    (".../pytest-N/popen-gw0/test_commands_run_in_the_warm_0/run/runjob/warm", 88) is one; that
    is why these tests timed out in the parallel run and nowhere else."""
    run = Path(tempfile.mkdtemp(prefix="rjw-"))
    assert len(str(run / "runjob" / "warm")) <= _warm._FOLDER_MAX
    env = {"RUNJOB_WARM": "1", "XDG_RUNTIME_DIR": str(run), "RUNJOB_WARM_IDLE": "120"}
    yield env
    for log in (run / "runjob" / "warm").glob("*.sock.log"):
        match = re.match(r"warm process (\d+) ", log.read_text())
        if match:
            try:
                os.kill(int(match.group(1)), signal.SIGTERM)  # the warm process this test started
            except ProcessLookupError:
                pass  # it found itself stale and ended already
    shutil.rmtree(run, ignore_errors=True)


def _log(env: dict) -> Path:
    [log] = (Path(env["XDG_RUNTIME_DIR"]) / "runjob" / "warm").glob("*.sock.log")
    return log


def _served(env: dict) -> list[str]:
    return re.findall(r"^served (\S+) in child \d+$", _log(env).read_text(), re.M)


def _start(env: dict, cwd: Path) -> None:
    first = run_cli("status", cwd=cwd, env={**env, "RUNJOB_HOME": str(cwd / ".runjob")})
    assert first.returncode == 0, first.stderr
    folder = Path(env["XDG_RUNTIME_DIR"]) / "runjob" / "warm"
    try:
        wait_until(lambda: list(folder.glob("*.sock")) and "serving" in _log(env).read_text(), what="the warm process")
    except AssertionError as exc:
        held = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else "nothing: it was never made"
        logs = {p.name: p.read_text(errors="replace")[-2000:] for p in folder.glob("*.log")}
        raise AssertionError(f"{exc}; the socket folder {folder} holds {held}; logs: {logs}") from None
    assert _served(env) == []  # the first command ran itself: there was no warm process yet


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

    # An offline health scan too (issue 29: timed against grep): its findings and exit code.
    (two / "train.log").write_text("{'loss': 1.2}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    scanned = run_cli("health", "scan", "train.log", "--json", cwd=two, env={**warm_env, "RUNJOB_HOME": str(two / ".runjob")})
    assert scanned.returncode == 1 and '"label": "cuda_oom"' in scanned.stdout and '"line": 2' in scanned.stdout
    assert _served(warm_env)[-1] == "health"


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
    (["health", "scan", "train.log"], True, "health"),  # reads files only, never the terminal
    (["health"], False, None),
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


def test_the_warm_process_leaves_its_children_no_converter_to_build_or_module_to_import():
    """What `status` and `submit` reach for lazily (cattrs, the converter and its hooks for
    the stored records) is ready in the warm process, so each forked child skips it."""
    probe = textwrap.dedent("""
        import sys
        from runjob_core.warm import server
        server.preload()
        from runjob_core.config.converter import converter
        assert converter.cache_info().currsize == 1, converter.cache_info()
        before = set(sys.modules)
        from runjob_core.config import job_from_mapping, job_from_json, job_to_json, record_from_json
        from runjob_core.models import Submission
        job = job_from_mapping({"name": "probe", "cluster": "c", "command": "true"}, source="probe")
        job_from_json(job_to_json(job))
        record_from_json('{"job_id": "j", "attempt": 1, "backend": "slurm", "cluster": "c", "backend_job_id": "1", '
                         '"tag": "j-1", "job_dir": "/d", "workdir": "/w", "log_path": "/l", "results_dir": "/r", '
                         '"checkpoint_dir": "/c", "progress_path": "/p", "submitted_at": 1.0, "source": "s"}', Submission)
        for name in ("runjob_core.interrupted", "runjob_core.estimator.eta", "runjob_core.cli._plaintable"):
            assert name in before, name
        print(sorted(set(sys.modules) - before))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_warm_child_takes_the_plugin_manager_the_warm_process_built(tmp_path):
    """Registering every plugin cost each command ~20-30 ms (issue 29): the warm process builds
    the manager once and each child takes it, here with building a new one made impossible."""
    (tmp_path / "train.log").write_text("{'loss': 1.2}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    probe = textwrap.dedent("""
        import os, sys
        from runjob_core import plugins
        from runjob_core.warm import server
        prepared = server.preload()
        def no_new_manager(**kwargs):
            raise AssertionError("a new plugin manager was built")
        plugins.get_plugin_manager = no_new_manager
        for argv in (["status", "--json"], ["health", "scan", "train.log", "--json"]):
            sys.argv = ["runjob", *argv]
            pid = os.fork()
            if pid == 0:
                os._exit(server._run_command(prepared))
            print(argv[0], os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "RUNJOB_HOME": str(tmp_path / ".runjob")})
    assert done.returncode == 0, done.stderr
    assert "a new plugin manager was built" not in done.stderr, done.stderr
    codes = re.findall(r"^(status|health) (-?\d+)$", done.stdout, re.M)
    assert codes == [("status", "0"), ("health", "1")], (done.stdout, done.stderr)  # the OOM: exit 1
    assert '"label": "cuda_oom"' in done.stdout


def test_the_prepared_plugin_manager_is_taken_once_and_only_in_the_environment_it_was_built_for(monkeypatch):
    from runjob_core import plugins

    monkeypatch.delenv("RUNJOB_DISABLE_PLUGINS", raising=False)
    prepared = plugins.Prepared()
    pm = prepared.take()
    assert pm is not None and pm.has_plugin("runjob_core.defaults")
    assert prepared.take() is None  # a second context of the same command builds its own
    other = plugins.Prepared()
    monkeypatch.setenv("RUNJOB_DISABLE_PLUGINS", "health")  # the child's environment blocks a plugin
    assert other.take() is None
    monkeypatch.delenv("RUNJOB_DISABLE_PLUGINS")
    broken, _infos = plugins.get_plugin_manager()
    broken.problems = {"x": plugins.PluginInfo("x", None, None, error="failed to load")}
    assert plugins.Prepared(broken).take() is None  # the child loads it again and says why it failed


def test_a_warm_child_renders_with_the_templates_the_warm_process_compiled(tmp_path):
    """Making the Jinja2 environment and loading the compiled templates cost each submit ~2 ms
    (issue 29): the warm process does both once. A folder with its own .runjob/templates, or
    an edited template, still gets what it would get without the warm process."""
    (tmp_path / "job.yaml").write_text("name: probe\ncommand: 'echo from the job'\n")
    user = tmp_path / "user"
    (user / ".runjob" / "templates").mkdir(parents=True)
    (user / "job.yaml").write_text("name: probe\ncommand: 'echo from the job'\n")
    (user / ".runjob" / "templates" / "local.sh.j2").write_text("# the user's own template\n{{ job.command }}\n")
    probe = textwrap.dedent("""
        import os, sys
        from runjob_core import templating
        from runjob_core.warm import server
        prepared = server.preload()
        made = []
        real = templating.make_environment
        templating.make_environment = lambda **kwargs: made.append(1) or real(**kwargs)
        for folder in (".", "user"):
            sys.argv = ["runjob", "render", "job.yaml"]
            pid = os.fork()
            if pid == 0:
                os.chdir(folder)
                os.environ["RUNJOB_HOME"] = os.path.abspath(".runjob")
                code = server._run_command(prepared)
                print(f"environments made in {folder}: {len(made)}", flush=True)
                os._exit(code)
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "environments made in .: 0" in done.stdout  # the warm process's, templates compiled
    assert "environments made in user: 1" in done.stdout  # the user's templates come first: its own
    assert "# the user's own template" in done.stdout
    assert done.stdout.count("echo from the job") == 2


def test_prepared_templates_go_only_with_the_plugin_manager_they_were_made_for(monkeypatch):
    from runjob_core import plugins

    monkeypatch.delenv("RUNJOB_DISABLE_PLUGINS", raising=False)
    pm, _infos = plugins.get_plugin_manager()
    made = {"key": "environment"}
    assert plugins.Prepared(pm, templates=dict(made)).take_templates() == {}  # the manager was not taken
    prepared = plugins.Prepared(pm, templates=dict(made))
    assert prepared.take() is pm and prepared.take_templates() == made
    assert prepared.take_templates() == {}  # once
    other = plugins.Prepared(pm, templates=dict(made))
    monkeypatch.setenv("XDG_CACHE_HOME", "/elsewhere")  # compiled templates are kept somewhere else
    assert other.take() is pm and other.take_templates() == {}


def test_a_warm_child_settles_the_wal_it_grew_after_its_answer(tmp_path):
    """The child never closes the store (it ends with os._exit), so SQLite's WAL kept growing to
    its 4 MB ceiling and every command read it all back when it opened the state (issue 29)."""
    (tmp_path / "job.yaml").write_text("name: probe\ncommand: 'true'\n")
    probe = textwrap.dedent("""
        import os, sys
        from runjob_core import store
        from runjob_core.warm import server
        prepared = server.preload()
        store.WAL_SETTLE_AT = 0  # any WAL at all is past the bound here
        sys.argv = ["runjob", "submit", "job.yaml", "--yes"]
        pid = os.fork()
        if pid == 0:
            code = server._run_command(prepared)
            print("WAL after the command:", os.path.getsize(".runjob/state.db-wal"), flush=True)
            server._after_answer(prepared)
            print("WAL after the answer:", os.path.getsize(".runjob/state.db-wal"), flush=True)
            os._exit(code)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "RUNJOB_HOME": str(tmp_path / ".runjob")})
    assert done.returncode == 0, done.stderr
    grown = int(re.search(r"WAL after the command: (\d+)", done.stdout).group(1))
    assert grown > 0 and "WAL after the answer: 0" in done.stdout, done.stdout


def test_a_warm_child_gives_the_callers_streams_back_before_its_work_after_the_answer(tmp_path):
    """Whoever reads a command's output (``$(runjob status)``, a pipe, the benchmarks' capture)
    waits for every holder of the pipe to close it. A child that kept the caller's stdout until
    it exited made that reader wait for its work after the answer and for the teardown of a
    process of the warm one's size (~4 ms of each `runjob status`, issue 29). The probe stops the
    child inside that work and looks at the pipe: it must be at its end already, with the
    command's whole output before it; what the child writes then goes to the warm log."""
    probe = textwrap.dedent("""
        import os, socket, sys
        from runjob_core.warm import server
        prepared = server.preload()
        gate_r, gate_w = os.pipe()
        reached_r, reached_w = os.pipe()
        def held_after_the_answer():
            print("after the answer", flush=True)
            os.write(reached_w, b"here")
            os.read(gate_r, 1)
        prepared.after_answer.append(held_after_the_answer)
        out_r, out_w = os.pipe()
        ours, theirs = socket.socketpair()
        log = os.open("warm.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        pid = os.fork()
        if pid == 0:
            os.dup2(log, 1)
            os.dup2(log, 2)  # the warm process's own output: its log
            ours.close()
            os.close(out_r)
            request = {"argv": ["runjob", "status", "--json"], "cwd": os.getcwd(), "env": dict(os.environ),
                       "umask": 0o022, "encoding": ["utf-8"] * 3}
            server._child(theirs, request, [os.open(os.devnull, os.O_RDONLY), out_w, os.dup(out_w)], prepared)
        os.close(out_w)
        theirs.close()
        os.read(reached_r, 4)  # the child is held inside its work after the answer
        os.set_blocking(out_r, False)
        output = b""
        try:
            while chunk := os.read(out_r, 65536):
                output += chunk
            print("stdout ended while the child was held:", output.decode().strip())
        except BlockingIOError:
            print("stdout still open while the child was held")
        reply = b""
        while len(reply) < 10:
            reply += ours.recv(10 - len(reply))
        print("exit code:", int.from_bytes(reply[6:], "big", signed=True))
        os.write(gate_w, b"go")
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "RUNJOB_HOME": str(tmp_path / ".runjob")})
    assert done.returncode == 0, done.stderr
    assert "stdout ended while the child was held: []" in done.stdout, done.stdout
    assert "exit code: 0" in done.stdout
    assert "after the answer" in (tmp_path / "warm.log").read_text()


def test_a_spare_touches_the_preloaded_objects_ahead_though_they_are_frozen():
    """The warm process freezes what it preloaded (gc.freeze: no child's collection walks it), and
    frozen objects are gone from gc.get_objects(): the spares must still touch them ahead of a
    command (copy-on-write faults taken while no caller waits). Measured as the page faults of a
    forked spare that takes them: thousands, not none."""
    code = textwrap.dedent("""
        import gc, os, resource, socket, sys
        from runjob_core.warm import server
        server.preload()
        preloaded = server.freeze_preloaded()
        assert len(preloaded) > 10000 and len(gc.get_objects()) < 1000, (len(preloaded), len(gc.get_objects()))
        assert any(o is sys.modules["runjob_core.cli"].__dict__ for o in preloaded)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("")  # an abstract address of its own; listening with no caller: nothing to read
        listener.listen(1)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            server._take_faults_ahead(listener, {}, preloaded)
            os.write(write, str(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(os.read(read, 64).decode())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RUNJOB_WARM": "0"})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 1000, done.stdout
