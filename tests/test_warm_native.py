"""The native client (runjob_core/warm/client.c): the warm protocol without starting Python.

It must send what the Python client sends (checked against the Python client itself over one
listening socket), run the Python client in its place whenever it cannot take the warm path,
and carry exit codes and signals like the Python client. Built here with the machine's C
compiler into a temporary folder: the installed command is not touched."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from runjob_core import warm as _warm
from runjob_core.testing import wait_until
from runjob_core.warm import native
from runjob_core.warm import server as _server

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and not os.environ.get("CC"),
                                reason="no C compiler: the native client is optional")
PYTHON_CLIENT = str(Path(_warm.__file__).parent / "python" / "runjob")


def _clean_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in native.PYTHON_VARIABLES}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """Built as the installer builds it: by a plain Python process, whose import path (not
    pytest's, which has the test folders on it) is the one compiled in."""
    path = tmp_path_factory.mktemp("native") / "runjob"
    done = subprocess.run([sys.executable, "-m", "runjob_core.warm.native", "build", str(path)],
                          env=_clean_environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert native.installed_key(str(path)) is not None
    return str(path)


@pytest.fixture
def run_dir():
    """A short private XDG_RUNTIME_DIR (a socket path must stay under 80 characters there)."""
    run = Path(tempfile.mkdtemp(prefix="rjn-"))
    (run / "runjob" / "warm").mkdir(parents=True, mode=0o700)
    yield run
    for log in (run / "runjob" / "warm").glob("*.sock.log"):
        match = re.match(r"warm process (\d+) ", log.read_text())
        if match:
            try:
                os.kill(int(match.group(1)), signal.SIGTERM)
            except ProcessLookupError:
                pass  # it ended already (stale or idle)
    shutil.rmtree(run, ignore_errors=True)


def _environment(run: Path, **extra: str) -> dict[str, str]:
    """A plain caller's environment: no variable of the test runner that changes Python's import path."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    return {**keep, "XDG_RUNTIME_DIR": str(run), "RUNJOB_WARM": "1", "RUNJOB_HOME": str(run / "home"), **extra}


class _Listener:
    """A warm socket that records each request and the program that sent it, and answers
    "ran, exit code *code*" (or "stale", so the caller runs the command itself)."""

    def __init__(self, run: Path, key: str, code: int = 7, answer: bytes = _warm.PID):
        self.path = str(run / "runjob" / "warm" / f"{key}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.sock.settimeout(0.05)
        self.code, self.answer, self.requests, self.closing = code, answer, [], False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            conn.settimeout(60)
            with conn:
                pid = int.from_bytes(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[:4], sys.byteorder)
                program = os.readlink(f"/proc/{pid}/exe")
                request, fds = _server._receive(conn)
                for fd in fds:
                    os.close(fd)
                self.requests.append((program, request))
                if self.answer == _warm.PID:
                    conn.sendall(_warm.PID + os.getpid().to_bytes(4, "big"))
                    conn.sendall(_warm.EXIT + self.code.to_bytes(4, "big", signed=True))
                else:
                    conn.sendall(self.answer)

    def close(self):
        self.closing = True
        self.thread.join(5)
        self.sock.close()
        assert not self.thread.is_alive()


def _run(argv: list, env: dict, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=60, **kwargs)


@pytest.mark.parametrize("locale", [{"LANG": "C.UTF-8"}, {"LANG": "C"}, {}, {"LC_ALL": "C.UTF-8", "LANG": "C"},
                                    {"LC_ALL": "C"}, {"LANG": "xx_YY.UTF-8"}, {"LC_CTYPE": "C", "LANG": "C.UTF-8"}],
                         ids=["utf8", "c-coerced", "no-locale", "lc-all", "lc-all-c", "unknown-locale", "lc-ctype-c"])
def test_the_native_client_sends_what_the_python_client_sends(client, run_dir, tmp_path, locale):
    listener = _Listener(run_dir, native.installed_key(client))
    try:
        env = _environment(run_dir, CAFÉ="crème brûlée", EMPTY="", WITH_EQUALS="a=b=c", **locale)
        argv = ["status", "élément", "--json", ""]
        native_run = _run([client, *argv], env, tmp_path, umask=0o027, stdin=subprocess.PIPE)
        python_run = _run([sys.executable, PYTHON_CLIENT, *argv], env, tmp_path, umask=0o027, stdin=subprocess.PIPE)
    finally:
        listener.close()
    assert (native_run.returncode, python_run.returncode) == (7, 7), (native_run.stderr, python_run.stderr)
    [(native_program, native_request), (python_program, python_request)] = listener.requests
    assert native_program == os.path.realpath(client)  # the native client itself sent it: no Python started
    assert python_program == os.path.realpath(sys.executable)
    assert native_request["argv"][0] == client and python_request["argv"][0] == "runjob"
    native_request["argv"][0] = python_request["argv"][0] = "runjob"
    assert native_request == python_request  # env (C-locale coercion included), cwd, umask, path, encodings
    assert native_request["argv"] == ["runjob", *argv] and native_request["umask"] == 0o027
    assert native_request["cwd"] == str(tmp_path) and native_request["env"]["CAFÉ"] == "crème brûlée"


@pytest.mark.parametrize(("case", "argv", "extra"), [
    ("a command that may read the terminal", ["run", "job.yaml"], {}),
    ("the warm path off", ["status"], {"RUNJOB_WARM": "0"}),
    ("PYTHONPATH changes the import path", ["status"], {"PYTHONPATH": "/nonexistent"}),
    ("a non-UTF-8 locale", ["status"], {"LC_ALL": "C.ISO-8859-1"}),
])
def test_the_native_client_leaves_to_the_python_client_what_it_cannot_do_itself(client, run_dir, tmp_path, case, argv, extra):
    if "C.ISO-8859-1" in extra.values():
        # A Latin-1 locale of the test's own (glibc reads LOCPATH): the machine has only C and C.UTF-8.
        locales = tmp_path / "locales"
        locales.mkdir()
        made = subprocess.run(["localedef", "-i", "C", "-f", "ISO-8859-1", str(locales / "C.ISO-8859-1")],
                              capture_output=True, text=True, check=False)
        if made.returncode != 0:
            pytest.skip(f"localedef could not make a Latin-1 locale: {made.stderr.strip()}")
        extra = {**extra, "LOCPATH": str(locales)}
    listener = _Listener(run_dir, native.installed_key(client))
    try:
        # The Python client in its place: --version is answered there, whatever the rest.
        done = _run([client, "--version"], _environment(run_dir, **extra), tmp_path)
        assert done.returncode == 0 and done.stdout.decode().startswith("runjob "), done.stderr
        done = _run([client, *argv], {**_environment(run_dir, **extra), "RUNJOB_WARM": "0"}, tmp_path)
        assert "Traceback" not in done.stderr.decode()
        done = _run([client, *argv], _environment(run_dir, **extra), tmp_path)
    finally:
        listener.close()
    programs = [program for program, _request in listener.requests]
    assert os.path.realpath(client) not in programs, case


def test_bytes_that_are_not_utf8_go_to_the_python_client(client, run_dir, tmp_path):
    listener = _Listener(run_dir, native.installed_key(client))
    try:
        done = _run([client.encode(), b"status", b"caf\xe9"], _environment(run_dir, LANG="C.UTF-8"), tmp_path)
    finally:
        listener.close()
    assert done.returncode == 7
    [(program, request)] = listener.requests
    assert program == os.path.realpath(sys.executable)  # the Python client sent it, surrogate-escaped
    assert request["argv"][1:] == ["status", "caf\udce9"]


def test_a_stale_answer_runs_the_command_in_the_python_client(client, run_dir, tmp_path):
    listener = _Listener(run_dir, native.installed_key(client), answer=_warm.STALE)
    try:
        done = _run([client, "status", "--json"], _environment(run_dir), tmp_path)
    finally:
        listener.close()
    assert done.returncode == 0 and done.stdout.strip() == b"[]", done.stderr
    programs = [os.path.basename(program) for program, _request in listener.requests]
    assert programs[0] == "runjob" and programs[1:] == [os.path.basename(os.path.realpath(sys.executable))]


def test_through_a_real_warm_process_output_exit_codes_and_signals_are_the_commands(client, run_dir, tmp_path):
    env = _environment(run_dir, LANG="C.UTF-8", RUNJOB_WARM_IDLE="120")
    (tmp_path / "job.yaml").write_text("name: native-one\ncommand: 'echo hi'\n")
    first = _run([client, "status", "--json"], env, tmp_path)  # no warm process yet: Python runs it, starts one
    assert first.returncode == 0, first.stderr
    log = run_dir / "runjob" / "warm" / f"{native.installed_key(client)}.sock.log"
    wait_until(lambda: log.exists() and "serving" in log.read_text(), what="the warm process")

    def served() -> list[str]:
        return re.findall(r"^served (\S+) in child \d+$", log.read_text(), re.M)

    submitted = _run([client, "submit", "job.yaml", "--yes"], env, tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    assert re.fullmatch(rb"rj-\S+ local-\d+\n", submitted.stdout)
    shown = _run([client, "status", "native-one", "--json"], env, tmp_path)
    assert b'"name": "native-one"' in shown.stdout
    missing = _run([client, "status", "nope"], env, tmp_path)
    assert missing.returncode == 1 and b"no job with id or name 'nope'" in missing.stderr
    assert served() == ["submit", "status", "status"]

    # A scan that waits on a pipe nobody writes: Ctrl-C reaches the warm child through the client.
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    scan = subprocess.Popen([client, "health", "scan", str(fifo)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    holder = os.open(fifo, os.O_WRONLY)  # the child opened it for reading: it is running
    try:
        wait_until(lambda: _catches(scan.pid, signal.SIGINT), what="the client to pass Ctrl-C on")
        scan.send_signal(signal.SIGINT)
        _out, err = scan.communicate(timeout=60)
    finally:
        os.close(holder)
    assert served()[-1] == "health"
    assert scan.returncode == 1 and b"Aborted!" in err  # click's answer to Ctrl-C, in the child


def _catches(pid: int, signum: int) -> bool:
    """Whether process *pid* has a handler for *signum* (SigCgt of /proc/PID/status)."""
    caught = re.search(r"^SigCgt:\s*([0-9a-f]+)$", Path(f"/proc/{pid}/status").read_text(), re.M)
    return bool(caught and int(caught.group(1), 16) >> (signum - 1) & 1)


def test_install_replaces_only_runjobs_own_command_and_remove_puts_the_python_script_back(tmp_path, monkeypatch):
    command = tmp_path / "runjob"
    command.write_text(native._CONSOLE_SCRIPT.format(python=sys.executable))
    monkeypatch.setattr(native, "command_path", lambda: str(command))
    assert native.install() == str(command)
    assert native.installed_key(str(command)) == _warm.key(native.import_path())
    assert os.access(command, os.X_OK)
    assert native.ensure() is None  # current: not built again
    assert list(tmp_path.iterdir()) == [command]  # no temporary file left

    # The warm process of an interpreter whose import path changed rebuilds it; of the same, not.
    assert not native.refresh(native.installed_key(str(command)))
    first = command.stat().st_mtime_ns
    assert native.refresh("0" * 16)
    assert command.stat().st_mtime_ns != first

    native.remove()
    assert native.installed_key(str(command)) is None
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True, env={**_clean_environment(), "RUNJOB_WARM": "0"})
    assert done.returncode == 0 and done.stdout.startswith("runjob "), done.stderr

    foreign = tmp_path / "other"
    foreign.write_text("#!/bin/sh\necho not runjob\n")
    with pytest.raises(native.NativeError, match="is not runjob's command"):
        native.install(str(foreign))
    assert foreign.read_text() == "#!/bin/sh\necho not runjob\n"


def test_without_a_compiler_the_install_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    command = tmp_path / "runjob"
    command.write_text(native._CONSOLE_SCRIPT.format(python=sys.executable))
    monkeypatch.setattr(native, "command_path", lambda: str(command))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert native.main(["install"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("runjob: ") and "client.c" in err and "Traceback" not in err
    assert native.installed_key(str(command)) is None and list(tmp_path.iterdir()) == [command]


@pytest.mark.parametrize("which", ["native", "python"])
def test_a_caller_without_stdin_runs_the_command_itself(client, run_dir, tmp_path, which):
    """A closed descriptor 0 (cron's `<&-`) would be the client's own socket once it connects, and the warm
    child would read the connection as its stdin: both clients leave such a command to run in its own process."""
    listener = _Listener(run_dir, native.installed_key(client))
    program = [client] if which == "native" else [sys.executable, PYTHON_CLIENT]
    try:
        done = subprocess.run([*program, "status", "--json"], env=_environment(run_dir), cwd=tmp_path, capture_output=True, timeout=60,
                              preexec_fn=lambda: os.close(0))
    finally:
        listener.close()
    assert done.returncode == 0 and done.stdout.strip() == b"[]", done.stderr
    assert listener.requests == []
