"""The warm runjob process: everything imported once, one forked child per command.

Started by the first eligible command (:mod:`runjob_core.warm` explains the why) as
``python -m runjob_core.warm.server SOCKET``. It imports what the eligible commands need
(click, the CLI, lifecycle, monitor, the store, templating, every plugin, rich), then
accepts connections on SOCKET. For each, it checks the caller is this user
(``SO_PEERCRED``) and that no imported runjob module changed on disk since (an edited
checkout or an upgrade: it answers "stale" and exits, so the caller runs the command
itself and starts a fresh one), then forks. The child takes the caller's stdin, stdout
and stderr, working folder, environment and umask, runs the command through
:func:`runjob_core.cli.main` and sends back the exit code. The warm process itself never
opens the store, a connection or a file of any job: a child starts from a clean slate.

The fork itself (~2-5 ms for a process this size, more on a loaded machine) is done ahead:
a *spare* child, forked before the command arrives, waits on the socket and becomes the
command's child itself; the warm process forks the next spare once that command has ended
(or another caller knocks before). A spare that finds the warm process gone (a pipe whose
other end closes) ends too.

It exits after ``RUNJOB_WARM_IDLE`` seconds without a command (default 600), and holds a
lock on ``SOCKET.lock`` while it lives, so two commands starting one at the same instant
leave one warm process.
"""

from __future__ import annotations

import fcntl
import gc
import io
import marshal
import os
import select
import signal
import socket
import struct
import sys
import traceback
from typing import NoReturn

from runjob_core import warm as _warm  #: What a command of :data:`runjob_core.warm._ELIGIBLE` imports, imported once here.
PRELOAD = (
    "runjob_core.cli", "runjob_core.cli._common", "runjob_core.cli._show", "runjob_core.cli.submit",
    "runjob_core.cli.status", "runjob_core.cli.run", "runjob_core.lifecycle", "runjob_core.monitor",
    "runjob_core.config", "runjob_core.store", "runjob_core.templating", "runjob_core.staging",
    "runjob_core.transport.agent", "yaml", "rich.console", "rich.table", "rich.markup",
    # Imported lazily by `status` and `submit` (cattrs alone costs a child ~30 ms).
    "runjob_core.config.converter", "runjob_core.config.guard", "runjob_core.config.serving",
    "runjob_core.interrupted", "runjob_core.estimator.eta", "runjob_core.cli._plaintable",
    # `health scan` (issue 29: timed against grep, whole process).
    "runjob_core.cli.health", "runjob_core.context", "runjob_core.monitor.scan",
    # `submit` asks whether its file is a sweep (~20 ms of imports, more without bytecode), and
    # submits one (its array's modules: ~10-15 ms a child).
    "runjob_core.cli._sweep", "runjob_core.sweep", "runjob_core.sweep._run", "runjob_core.sweep._array",
    "runjob_core.sweep._scripts", "runjob_core.sweep._budget", "runjob_core.sweep._paused",
)
#: Imported when installed: a team's shared state (psycopg alone is ~160 ms of every `status` on
#: PostgreSQL, and `status --json` writes with the encoder of cli._jsonout).
OPTIONAL = ("runjob_core.cli._jsonout", "runjob_core.store.postgres", "psycopg", "psycopg.rows")


def main(path: str) -> None:
    lock = open(f"{path}.lock", "a")  # noqa: SIM115 - held for the whole life of the process
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another warm process for this interpreter is starting or serving
    if os.path.basename(path) != f"{_warm.key()}.sock":
        return  # started with another import path than the command that asked: of no use to it
    prepared = preload()
    modules = _module_files()
    preloaded = freeze_preloaded()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)  # left by a warm process that was killed; we hold the lock
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(16)
    idle = float(os.environ.get("RUNJOB_WARM_IDLE", "600"))
    try:
        os.ftruncate(1, 0)  # the log (stdout, appended to) holds this process's life only
    except OSError:
        pass  # started by hand on a terminal: nothing to truncate
    print(f"warm process {os.getpid()} serving {path}", flush=True)
    _refresh_native_client()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))  # and the socket goes with us
    try:
        while _supervise(listener, *_fork_spare(listener, lock, modules, prepared, preloaded), idle):
            pass  # the spare took a command: fork the next one
    finally:
        if os.path.exists(path):
            os.unlink(path)


def _refresh_native_client() -> None:
    """Rebuild the installed native client when the import path it has compiled in is no longer
    this interpreter's (an editable install added a path entry): it would find no warm process and
    run the Python client every time. Not when a variable changed this process's import path
    (PYTHONPATH: the native client leaves such commands to the Python client anyway)."""
    from runjob_core.warm import native

    if any(os.environ.get(name) for name in native.PYTHON_VARIABLES):
        return
    try:
        if native.refresh(_warm.key()):
            print(f"rebuilt the native client {native.command_path()} for this import path", flush=True)
    except (native.NativeError, OSError) as exc:
        print(f"the native client was not rebuilt: {exc}", flush=True)


#: What a spare tells the warm process on its report pipe: it took a caller; the code changed.
_TOOK, _STALE_CODE = b"T", b"S"


def _fork_spare(listener: socket.socket, lock, modules: dict, prepared, preloaded: list) -> tuple[int, int]:
    """Fork the child that takes the next command; (its report pipe, the pipe whose closing tells it to end)."""
    report_r, report_w = os.pipe()
    life_r, life_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the warm process's handler (it unlinks the socket)
            os.close(report_r)
            os.close(life_w)
            os.close(lock.fileno())  # the warm process's lock is its own: a long command must not keep it
            _spare(listener, life_r, report_w, modules, prepared, preloaded)
        finally:
            os._exit(0)  # never back into the warm process's loop
    os.close(report_w)
    os.close(life_r)
    return report_r, life_w


def _supervise(listener: socket.socket, report: int, life: int, idle: float) -> bool:
    """Wait while the spare waits for a caller and then runs its command; False when the warm
    process is to end (idle, stale, or a spare that ended without a word)."""
    try:
        if not select.select([report], [], [], idle)[0]:
            os.close(life)  # idle: the spare ends, unless it took a caller at this very moment
            life = -1
        if os.read(report, 1) != _TOOK:
            return False
        # Its command runs now: the next spare is forked when it ends (the two do not share the
        # CPU), or at once when another caller knocks first.
        if report in select.select([report, listener], [], [])[0]:
            return os.read(report, 1) != _STALE_CODE
        return True
    finally:
        os.close(report)
        if life != -1:
            os.close(life)


def _spare(listener: socket.socket, life: int, report: int, modules: dict, prepared, preloaded: list) -> None:
    """In a spare child: wait for a caller (or for the warm process to end), then serve it."""
    # A caller soon after the last command (a script's loop) is served at once; a spare idle for
    # a moment takes the faults ahead, unless a caller comes meanwhile.
    if not select.select([listener, life], [], [], _FAULTS_AHEAD_AFTER)[0]:
        _take_faults_ahead(listener, modules, preloaded)
    while True:
        if life in select.select([listener, life], [], [])[0]:
            return  # the warm process ended, or is idle
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            continue
        break
    os.close(life)
    os.write(report, _TOOK)
    conn.settimeout(None)
    with conn:
        if not _serve(conn, listener, modules, prepared):
            os.write(report, _STALE_CODE)  # the next command runs itself and starts a fresh warm process


def preload():
    """Import what the eligible commands need; the plugin manager each child takes
    (:class:`runjob_core.plugins.Prepared`)."""
    import importlib

    sys.modules.setdefault("invoke", None)  # as runjob_core.cli.main does: paramiko's optional import
    for name in PRELOAD:
        importlib.import_module(name)
    for name in OPTIONAL:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the postgres extra is not installed: a child that needs it says so in one line
    from runjob_core import plugins

    from runjob_core import lifecycle

    from runjob_core._entry_points import describe_commands

    pm, _infos = plugins.get_plugin_manager()  # imports every installed plugin; kept for the children
    describe_commands()  # plugin commands' help for `runjob --help`, which imports none
    for _name, plugin in pm.list_name_plugin():
        _import_submodules(plugin)
    plugins.backend_infos(pm)  # and what backends import to describe themselves
    # Every template compiled once (and jinja2's lexer, kept per set of options): for every child.
    templates = lifecycle.prepared_templates(pm)
    _prime_converter()
    return plugins.Prepared(pm, templates=templates)


def _prime_converter() -> None:
    """The private converter built, and its structure hooks for the stored records generated
    (cattrs writes each one on first use): each child would otherwise do both again."""
    from runjob_core import models
    from runjob_core.config.converter import converter

    for cls in (models.JobSpec, models.Submission, models.Machine, models.ClusterConfig):
        converter().get_structure_hook(cls)


def _import_submodules(plugin) -> None:
    """A plugin's own modules, which its hooks import when first called (to keep
    ``runjob --help`` light): here they are imported once for every child. Test helpers
    are left out, and a module whose optional dependency is missing is simply not preloaded."""
    import importlib
    import pkgutil

    package = getattr(plugin, "__name__", "").split(".")[0]
    root = sys.modules.get(package)
    if package in ("", "runjob_core") or root is None or not hasattr(root, "__path__"):
        return
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        if any(part in ("testing", "tests", "__main__") for part in info.name.split(".")):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue  # an optional dependency that is not installed: the child imports it if it can


def _module_files() -> dict[str, tuple[int, int] | None]:
    """The runjob modules loaded here and the import path's folders, with their mtime and
    size: a change to any of them (an edit, an upgrade, a plugin installed) makes this
    process stale."""
    files = {path: None for path in sys.path[1:] if path}
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "") or ""
        file = getattr(module, "__file__", None)
        # This very module runs as __main__: its own code counts too.
        if file and (name.split(".")[0].startswith("runjob") or name == "__main__"):
            files[file] = None
    for file in files:
        files[file] = _stamp(file)
    return files


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


#: Seconds a spare waits for a caller before it takes the faults ahead (_take_faults_ahead).
_FAULTS_AHEAD_AFTER = 0.1


def freeze_preloaded() -> list:
    """Put what the preload made out of the cyclic collector's sight, and return it.

    It lives as long as this process: frozen (``gc.freeze``, inherited by each child), a child's
    collections look only at what its command makes. A full collection in a child walked the
    whole preloaded heap (~25 ms of a 1,000-element sweep's submit), and touched every page of it
    that the fork shares. Frozen objects are no longer in ``gc.get_objects()``, so the list of
    them is taken here, for the spares to touch ahead (:func:`_take_faults_ahead`)."""
    gc.collect()
    tracked = gc.get_objects()
    gc.freeze()
    return tracked


def _take_faults_ahead(listener: socket.socket, modules: dict, preloaded: list) -> None:
    """Touch what a command touches first while no command waits: every object the warm process
    preloaded (reading one writes its reference count, so its page is copied from the warm process
    now, not one fault at a time while the caller waits: ~2,500 faults of a submit, ~3 ms here)
    and the stale check's files. Touching them stops for a caller; the spare keeps a private copy
    of those pages (~19 MB) while it waits."""
    for start in range(0, len(preloaded), 4096):
        if select.select([listener], [], [], 0)[0]:
            return  # a caller: the rest faults as the command goes
        for _one in preloaded[start:start + 4096]:
            pass
    _stale(modules)


def _stale(modules: dict) -> bool:
    return any(_stamp(file) != stamp for file, stamp in modules.items())


def _serve(conn: socket.socket, listener: socket.socket, modules: dict, prepared) -> bool:
    """In the spare: become the caller's command (never returns), or refuse it; False when
    the code changed on disk (the warm process is stale and must exit)."""
    try:
        request, fds = _receive(conn)
    except (OSError, ValueError, EOFError, TypeError):
        return True  # a caller that went away or spoke nonsense: nothing ran
    try:
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        stale = _stale(modules)
        if (uid != os.getuid() or stale or request.get("path") != sys.path[1:] or len(fds) != 3
                or _warm.command_of(request["argv"][1:], stdin=fds[0]) is None):
            conn.sendall(_warm.STALE)  # the caller runs the command itself
            return not stale
        print(f"served {request['argv'][1]} in child {os.getpid()}", flush=True)
        listener.close()
        _child(conn, request, fds, prepared)  # never returns
    finally:
        for fd in fds:
            os.close(fd)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    header, ancillary, _flags, _addr = conn.recvmsg(4, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, len(data) - len(data) % 4, 4)]
    if len(header) < 4:
        raise EOFError("no request")
    size, body = int.from_bytes(header, "big"), b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the request was cut short")
        body += chunk
    request = marshal.loads(body)
    if not isinstance(request, dict):
        raise ValueError("not a request")
    return request, fds


def _child(conn: socket.socket, request: dict, fds: list[int], prepared) -> NoReturn:
    """In the forked child: become the caller's command, run it, report its exit code."""
    code = 1
    log = os.dup(2)  # the warm process's log: where the child writes once its caller has the answer
    try:
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in zip((0, 1, 2), fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.umask(request["umask"])
        sys.argv = list(request["argv"])
        sys.stdin, sys.stdout, sys.stderr = (_stream(fd, mode, encoding)
                                             for fd, mode, encoding in zip((0, 1, 2), "rww", request["encoding"]))
        conn.sendall(_warm.PID + os.getpid().to_bytes(4, "big"))
        code = _run_command(prepared)
    except BaseException:  # noqa: BLE001 - the child must always report and exit, never return to the loop
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # the caller's pipe closed: its exit code still goes back
        try:
            _let_go_of_streams(log)
        except OSError:
            pass  # no descriptor to spare: the reader sees the end when this process exits, as it always did
        try:
            conn.sendall(_warm.EXIT + int(code).to_bytes(4, "big", signed=True))
        except OSError:
            pass  # the caller is gone (killed): nobody is left to tell
        _after_answer(prepared)
        os._exit(code)


def _let_go_of_streams(log: int) -> None:
    """Give the caller's stdin, stdout and stderr back before the answer: whoever reads the
    command's output (``$(runjob status)``, a pipe) sees its end now, not when this process has
    exited, which for a process of this size (its memory torn down before its files are closed)
    takes ~3-5 ms. What the child still writes goes to the warm process's log."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)


def _after_answer(prepared) -> None:
    """What the command left for after its answer (the stores' WAL settled): the caller has
    its exit code, so nothing here is waited for, and nothing here is the command's outcome."""
    import sqlite3

    from runjob_core.store.faults import StoreError

    for settle in getattr(prepared, "after_answer", ()):
        try:
            settle()
        except (StoreError, sqlite3.Error):
            continue  # a busy or read-only state: the next command reads the WAL back, as before


def _run_command(prepared=None) -> int:
    from runjob_core.cli import main as run_cli

    try:
        run_cli(prepared)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _stream(fd: int, mode: str, encoding: str | None):
    tty = os.isatty(fd)
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "r":
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding or "utf-8", line_buffering=tty)
    # stderr is unbuffered in spirit (line buffered), stdout line buffered on a terminal, as Python's own.
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding or "utf-8", errors="backslashreplace" if fd == 2 else "strict",
                            line_buffering=tty or fd == 2, write_through=fd == 2)


if __name__ == "__main__":
    main(sys.argv[1])
