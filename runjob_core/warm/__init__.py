"""The ``runjob`` console script: hand the command to a warm runjob process when one is up.

Every ``runjob`` command is a new Python process that imports click, attrs, jinja2,
pluggy and every plugin before it does any work: ~100-150 ms, which is most of a submit
(a raw ``ssh`` over OpenSSH's ControlMaster is ~14 ms). So, like Emacs' server or
Android's zygote, the first eligible command starts a *warm* process in the background
(:mod:`runjob_core.warm.server`) that imports all of that once and then waits on a Unix
socket in a private folder. Later commands connect, send their argv, working folder,
environment and umask, and pass their own stdin/stdout/stderr (``SCM_RIGHTS``); the warm
process forks a child that runs the command exactly as this process would have, on those
very file descriptors, and sends back its exit code. Ctrl-C and other signals are passed
on to the child. Anything unusual (no warm process, a stale one whose code changed on
disk, a protocol surprise) runs the command here as before: the warm path is only ever
a shortcut.

Only commands that never read the terminal go this way (the child is not in the
terminal's foreground process group, so a prompt would stop it): ``status``,
``submit`` with ``--yes`` or without a terminal on stdin, and ``health scan``. ``RUNJOB_WARM=0`` turns the
warm path off; ``RUNJOB_WARM_IDLE`` sets the idle exit (seconds, default 600).

This module runs before anything else in every command, so it imports only built-in
modules (``_socket``, ``_signal``, ``marshal``, ``zlib``): ~1 ms.
"""

from __future__ import annotations

import os
import sys

#: Commands that may run in the warm process, and whether they may with these arguments.
#: (The native client, client.c, applies the same rules before it connects; the warm process
#: checks them again on what it received, the caller's own stdin included.)
_ELIGIBLE = {
    "status": lambda args, tty: True,
    "submit": lambda args, tty: "--yes" in args or "-y" in args or not tty(),
    "health": lambda args, tty: args[:1] == ["scan"],
}
#: Reply tags on the socket: the child's pid, its exit code, or "stale, run it yourself".
PID, EXIT, STALE = b"P", b"X", b"S"
_FOLDER_MAX = 80  # a Unix socket path must fit in 108 bytes (sun_path)


def enabled(environ=os.environ) -> bool:
    return environ.get("RUNJOB_WARM", "1") not in ("", "0") and hasattr(os, "fork")


def command_of(argv: list[str], stdin: int = 0) -> str | None:
    """The runjob command *argv* (without the program name) runs, if the warm path may run it
    with *stdin* (a descriptor) as its standard input. Global options (``--version``,
    ``--help``) run here, as always."""
    check = _ELIGIBLE.get(argv[0]) if argv else None
    return argv[0] if check is not None and check(argv[1:], lambda: os.isatty(stdin)) else None


def key(path: list[str] | None = None) -> str:
    """Which warm process serves this interpreter: its executable and import path (not
    ``sys.path[0]``, the script's own folder), so two virtual environments never share one.
    *path*: that import path (default ``sys.path[1:]``)."""
    import zlib

    joined = "\0".join([sys.executable, *(sys.path[1:] if path is None else path)]).encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(joined):08x}{zlib.adler32(joined):08x}"


def folder() -> str:
    """The private folder of the warm sockets (0700, ours), created when missing."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "runjob", "warm")
    if len(path) > _FOLDER_MAX:
        path = f"/tmp/runjob-warm-{os.getuid()}"
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.chmod(path, 0o700)  # raises for a folder that is not ours: the warm path is skipped
    return path


def socket_path() -> str:
    return os.path.join(folder(), f"{key()}.sock")


def main() -> None:
    """The console script: the warm path when it can, else the command in this process."""
    start_server = False
    if enabled() and command_of(sys.argv[1:]) is not None:
        try:
            path = socket_path()
        except OSError:
            path = None
        if path is not None:
            code = run_warm(path, sys.argv)
            if code is not None:
                sys.stdout.flush()
                os._exit(code)
            start_server = True
    from runjob_core.cli import main as run_here

    try:
        run_here()
    finally:
        if start_server:
            spawn_server()


def run_warm(path: str, argv: list[str]) -> int | None:
    """Run *argv* in the warm process at *path*; its exit code, or None to run it here."""
    import _socket
    import marshal

    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        # A closed stdin/stdout/stderr (cron's `<&-`) would be the socket itself once it is made, and
        # the warm child would take the connection for its stdin: run the command here.
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    try:
        umask = os.umask(0o022)
        os.umask(umask)
        try:
            cwd = os.getcwd()
        except OSError:
            return None  # a working folder that is gone: let the command say so itself
        request = marshal.dumps({
            "argv": list(argv), "cwd": cwd, "env": dict(os.environ), "umask": umask, "path": sys.path[1:],
            "encoding": [stream.encoding if stream else "utf-8" for stream in (sys.stdin, sys.stdout, sys.stderr)],
        })
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        sock.sendmsg([len(request).to_bytes(4, "big"), request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        reply = _read(sock, 5)
        if reply is None or reply[:1] != PID:
            return None  # stale (its code changed on disk) or refused: nothing ran there
        return _wait(sock, int.from_bytes(reply[1:], "big"))
    except OSError:
        return None
    finally:
        sock.close()


def _wait(sock, pid: int) -> int:
    """Pass signals on to the child *pid* until it sends its exit code."""
    import _signal

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
        except OSError:
            pass  # it has just ended: its exit code is on its way

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        _signal.signal(getattr(_signal, name), forward)
    reply = _read(sock, 5)
    if reply is None or reply[:1] != EXIT:
        # The child died without a word (killed by a signal that was not ours to pass on).
        os.write(2, b"runjob: the command ended without an exit status (its process was killed)\n")
        return 1
    return int.from_bytes(reply[1:], "big", signed=True) & 0xFF


def _read(sock, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def spawn_server() -> None:
    """Start the warm process in the background, unless one is starting already."""
    from runjob_core.transport import execute

    try:
        path = socket_path()
        # Started in the socket's private folder: its sys.path[0] holds no Python file.
        execute.run([sys.executable, "-m", "runjob_core.warm.server", path], detach=True,
                    cwd=os.path.dirname(path), output_path=f"{path}.log")
    except OSError as exc:
        # The command itself succeeded; only the next one will not be faster.
        print(f"runjob: could not start the warm process ({exc}); set RUNJOB_WARM=0 to stop trying", file=sys.stderr)
