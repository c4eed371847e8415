"""A connection shared between runjob commands, like OpenSSH's ControlMaster.

Every ``runjob`` command is a new process; without sharing, each one imports paramiko
(~80 ms) and does a fresh SSH handshake (~85 ms) before its first remote command. The
first command that needs a cluster starts this agent (``python -m runjob_core.transport.agent``),
which holds one :class:`runjob_core.transport.ssh.SSHTransport` and answers transport calls over a
Unix socket in a private folder (0700, peer uid checked). It exits after
``RUNJOB_SSH_AGENT_IDLE`` seconds without a request (default 600). Host keys are
verified by the agent exactly as by a direct connection; nothing secret crosses the socket.

The CLI turns it on (``RUNJOB_SSH_AGENT=1``, set by ``runjob`` itself unless the user set
it to 0); library callers get a direct connection unless they set it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runjob_core.errors import BackendError, RunjobError, TransportError
from runjob_core.transport.execute import Completed
from runjob_core.transport import FileInfo, Transport

START_TIMEOUT = 60.0
_ERRORS = {"TransportError": TransportError, "BackendError": BackendError, "RunjobError": RunjobError,
           "FileNotFoundError": FileNotFoundError, "PermissionError": PermissionError}


def enabled() -> bool:
    return os.environ.get("RUNJOB_SSH_AGENT", "0") not in ("", "0")


#: A Unix socket path must fit in 108 bytes (sun_path); leave room for the file name.
_MAX_FOLDER_LENGTH = 80


def _folder() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or str(Path.home() / ".cache")
    folder = Path(base) / "runjob" / "agents"
    if len(str(folder)) > _MAX_FOLDER_LENGTH:
        folder = Path("/tmp") / f"runjob-agents-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise TransportError(f"{folder} belongs to another user; set XDG_RUNTIME_DIR to a private folder")
    folder.chmod(0o700)
    return folder


#: The operations' version: a client never asks an agent started by older code for one it lacks.
PROTOCOL = 4  # 2: run_with_tree; 3: no tree operations (the client sends a tree's tar stream with run); 4: bytes input


def _key(cluster_json: str) -> str:
    # The whole connection config is in the name: a changed clusters.yaml gets a new agent,
    # and so does another protocol (an older agent may still serve older clients meanwhile).
    return hashlib.sha256(f"{PROTOCOL}\0{cluster_json}".encode()).hexdigest()[:20]


# ---------------------------------------------------------------------------- wire


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv(sock: socket.socket) -> dict[str, Any] | None:
    header = _read_exact(sock, 4)
    if header is None:
        return None
    body = _read_exact(sock, struct.unpack("!I", header)[0])
    return None if body is None else json.loads(body)


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# ---------------------------------------------------------------------------- client


class AgentTransport(Transport):
    """A transport whose calls are carried out by the cluster's agent process."""

    def __init__(self, cluster) -> None:
        from runjob_core.config import record_to_json

        self.cluster = cluster
        self.label = f"ssh {cluster.user + '@' if cluster.user else ''}{cluster.host}:{cluster.port} (shared)"
        self._config = record_to_json(cluster)
        self._path = _folder() / f"{_key(self._config)}.sock"
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.commands: list[str] = []

    def _socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = self._dial() or self._start()
        return self._sock

    def _dial(self) -> socket.socket | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            return None
        return sock

    def _start(self) -> socket.socket:
        import fcntl

        # Commands started at the same instant all find no agent: the first to take the
        # lock starts one, the others wait for the lock and then use that one.
        with open(self._path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._dial() or self._spawn()

    def _spawn(self) -> socket.socket:
        from runjob_core.transport import execute

        error_file = self._path.with_suffix(".error")
        error_file.unlink(missing_ok=True)
        self._path.unlink(missing_ok=True)
        log_file = self._path.with_suffix(".log")
        started = execute.run([sys.executable, "-m", "runjob_core.transport.agent", str(self._path)], input=None, detach=True,
                              output_path=str(log_file), env={"RUNJOB_SSH_AGENT_CONFIG": self._config})
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if error_file.exists():
                raise TransportError(error_file.read_text().strip())
            sock = self._dial()
            if sock is not None:
                return sock
            if _exited(started.pid):
                tail = log_file.read_text(errors="replace").strip().splitlines()[-1:] if log_file.exists() else []
                raise TransportError(f"the SSH agent for {self.cluster.name} exited at start: {' '.join(tail) or 'no output'}")
            time.sleep(0.01)
        raise TransportError(f"the SSH agent for {self.cluster.name} did not start within {START_TIMEOUT:.0f} s")

    def _call(self, op: str, **args: Any) -> Any:
        with self._lock:
            for attempt in (1, 2):
                sock = self._socket()
                try:
                    _send(sock, {"op": op, "args": args})
                    reply = _recv(sock)
                except OSError:
                    reply = None
                if reply is not None:
                    break
                # The agent went away (idle timeout between our calls): start a new one, once.
                self._sock = None
                sock.close()
                if attempt == 2:
                    raise TransportError(f"lost the SSH agent for {self.cluster.name}")
        if "error" in reply:
            kind, message = reply["error"]
            raise _ERRORS.get(kind, RunjobError)(message)
        return reply["result"]

    def run(self, argv: Sequence[str], *, input: str | bytes | None = None, timeout: float | None = None,
            idempotent: bool = True) -> Completed:
        import shlex

        self.commands.append(shlex.join(str(a) for a in argv))
        # Bytes (a tree's tar stream) cross the JSON as base64; the agent sends them on as bytes.
        text, data = (None, base64.b64encode(input).decode()) if isinstance(input, bytes) else (input, None)
        rc, out, err = self._call("run", argv=[str(a) for a in argv], input=text, input_base64=data, timeout=timeout,
                                  idempotent=idempotent)
        return Completed(tuple(argv), rc, out, err)

    def home(self) -> str:
        return self._call("home")

    def makedirs(self, path: str) -> None:
        self._call("makedirs", path=path)

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        self._call("put_text", path=path, text=text, mode=mode)

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        # The tar stream is made here and goes to the agent as one short command's stdin (see
        # transport.tree), under `sh -c` as every shell line through the agent.
        from runjob_core.transport import tree as _tree  # tarfile and gzip: not for every command

        _tree.put_tree(self.run_shell, self.cluster.host, root, files, also_make)

    def run_with_tree(self, tree: tuple[str, dict[str, tuple[str, int]], Sequence[str]], argv: Sequence[str], *,
                      timeout: float | None = None, idempotent: bool = True) -> Completed:
        """:meth:`SSHTransport.run_with_tree` through the agent: one remote command."""
        from runjob_core.transport import tree as _tree

        return _tree.run_with_tree(self.run_shell, self.cluster.host, tree, argv, timeout=timeout, idempotent=idempotent)

    def put_file(self, local: Path, path: str) -> None:
        self._call("put_file", local=str(Path(local).absolute()), path=path)

    def get_file(self, path: str, local: Path) -> None:
        self._call("get_file", path=path, local=str(Path(local).absolute()))

    def stat(self, path: str) -> FileInfo | None:
        result = self._call("stat", path=path)
        return FileInfo(*result) if result else None

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        return base64.b64decode(self._call("read_from", path=path, offset=offset, limit=limit))

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        return [FileInfo(*f) for f in self._call("listdir_recursive", path=path)]

    def disk_free(self, path: str) -> tuple[int, int]:
        return tuple(self._call("disk_free", path=path))

    def watch_socket(self) -> socket.socket:
        """A second connection to the agent that carries push-path news: the agent runs the
        one remote watcher of this connection (:mod:`runjob_core.monitor.hub`)."""
        self._call("home")  # the agent is up (started if need be)
        sock = self._dial()
        if sock is None:
            raise TransportError(f"lost the SSH agent for {self.cluster.name}")
        _send(sock, {"op": "watch", "args": {}})
        return sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _exited(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        finished, _status = os.waitpid(pid, os.WNOHANG)  # our child: reap it if it is done
    except ChildProcessError:
        return not Path(f"/proc/{pid}").exists()
    return finished == pid


# ---------------------------------------------------------------------------- server


def _handle(transport, op: str, args: dict[str, Any]) -> Any:
    if op == "run":
        data = args.get("input_base64")
        stdin = base64.b64decode(data) if data is not None else args["input"]
        result = transport.run(args["argv"], input=stdin, timeout=args["timeout"], idempotent=args["idempotent"])
        return [result.returncode, result.stdout, result.stderr]
    if op == "read_from":
        return base64.b64encode(transport.read_from(args["path"], args["offset"], args["limit"])).decode()
    if op == "stat":
        info = transport.stat(args["path"])
        return [info.path, info.size, info.mtime] if info else None
    if op == "listdir_recursive":
        return [[f.path, f.size, f.mtime] for f in transport.listdir_recursive(args["path"])]
    if op in ("put_file", "get_file"):
        local = Path(args["local"])
        return transport.put_file(local, args["path"]) if op == "put_file" else transport.get_file(args["path"], local)
    if op in ("home", "makedirs", "put_text", "disk_free"):
        return getattr(transport, op)(**args)
    raise ValueError(f"unknown agent operation {op!r}")


def serve(path: Path, cluster_json: str) -> None:
    from runjob_core.config import record_from_json
    from runjob_core.models import ClusterConfig
    from runjob_core.transport.ssh import SSHTransport

    error_file = path.with_suffix(".error")
    transport = SSHTransport(record_from_json(cluster_json, ClusterConfig))
    try:
        transport.run(["true"])  # connect now: a refused host key or login is reported to the client
    except RunjobError as exc:
        error_file.write_text(str(exc))
        return
    idle = float(os.environ.get("RUNJOB_SSH_AGENT_IDLE", "600"))
    old_umask = os.umask(0o177)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
    except OSError as exc:
        error_file.write_text(f"the SSH agent cannot listen on {path}: {exc}")
        raise
    finally:
        os.umask(old_umask)
    server.listen(16)
    server.settimeout(1.0)
    lock = threading.Lock()
    last_used = [time.monotonic()]
    hub = _watch_hub(transport)

    def client(conn: socket.socket) -> None:
        with conn:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
            if uid != os.getuid():
                return
            while (request := _recv(conn)) is not None:
                if request["op"] == "watch":  # this connection now carries push-path news
                    from runjob_core.monitor import hub as _watchhub
                    return _watchhub.serve_socket(hub, conn, _send, _recv)
                with lock:  # one SFTP session: requests go one at a time
                    last_used[0] = time.monotonic()
                    try:
                        reply = {"result": _handle(transport, request["op"], request["args"])}
                    except (RunjobError, FileNotFoundError, PermissionError) as exc:
                        reply = {"error": [type(exc).__name__ if type(exc).__name__ in _ERRORS else "RunjobError", str(exc)]}
                    last_used[0] = time.monotonic()
                _send(conn, reply)

    try:
        while time.monotonic() - last_used[0] < idle or hub.busy():  # a subscriber keeps it alive
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=client, args=(conn,), daemon=True).start()
    finally:
        path.unlink(missing_ok=True)
        server.close()
        hub.close()
        transport.close()


def _watch_hub(transport):
    from runjob_core.monitor import hub as _watchhub
    return _watchhub.Hub(lambda argv: _watchhub.ChannelStream(transport.open_stream(argv)))


if __name__ == "__main__":
    serve(Path(sys.argv[1]), os.environ["RUNJOB_SSH_AGENT_CONFIG"])
