"""The SSH transport: one paramiko connection per cluster, kept alive, reconnected.

paramiko is imported on first use (its import costs about 0.4 s). The socket gets
``TCP_NODELAY``: without it, Nagle's algorithm meets the server's delayed ACK and every
back-to-back command loses about 40 ms. Host keys are checked against known_hosts; an
unknown host is refused unless the cluster says ``allow_unknown_host: true``.

Commands are argv lists joined with :func:`shlex.join`, so every argument reaches the
remote shell quoted. Idempotent operations are retried after a reconnect when the
connection drops; a non-idempotent command (``sbatch``) is not, and its caller finds the
job again by its tag instead.
"""

from __future__ import annotations

import logging
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from runjob_core.errors import HostKeyMismatch, TransportError
from runjob_core.transport.execute import Completed
from runjob_core.models import ClusterConfig
from runjob_core.transport import FileInfo, Transport
from runjob_core.transport import tree as _tree

log = logging.getLogger(__name__)
T = TypeVar("T")

CONNECT_TIMEOUT = 15.0
KEEPALIVE_SECONDS = 30
#: Reconnect delays after a dropped connection.
BACKOFF = (0.2, 0.5, 1.0, 2.0, 4.0)


def _parse_target(text: str, default_user: str | None) -> tuple[str | None, str, int]:
    user, _, hostport = text.rpartition("@")
    host, _, port = hostport.partition(":")
    return (user or default_user), host, int(port or 22)


class SSHTransport(Transport):
    """A host over SSH (paramiko), host keys verified against *known_hosts* by default.

    *host_key_advice*: what a :class:`~runjob_core.errors.HostKeyMismatch` tells the user to
    do; a plugin that pins keys itself says why the key is pinned (see runjob-runpod).
    """

    def __init__(self, cluster: ClusterConfig, *, host_key_advice: str | None = None) -> None:
        if not cluster.host:
            message = f"cluster {cluster.name!r} has no host: set clusters.{cluster.name}.host in {cluster.source}"
            raise TransportError(message)
        self.cluster = cluster
        self.host_key_advice = host_key_advice
        self.label = f"ssh {cluster.user + '@' if cluster.user else ''}{cluster.host}:{cluster.port}"
        self._client: Any = None
        self._sftp: Any = None
        self._jump: Any = None
        self._home: str | None = None
        #: Every remote command run, in order (tests and benchmarks count them).
        self.commands: list[str] = []
        self.connects = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ connection

    def _known_hosts(self) -> str | None:
        path = self.cluster.known_hosts or "~/.ssh/known_hosts"
        path = os.path.expanduser(path)
        if os.path.exists(path):
            return path
        if self.cluster.known_hosts:
            message = f"known_hosts file {path} (clusters.{self.cluster.name}.known_hosts in {self.cluster.source}) does not exist"
            raise TransportError(message)
        return None

    def _new_client(self, host: str, port: int, user: str | None, sock: Any = None) -> Any:
        import paramiko

        client = paramiko.SSHClient()
        known = self._known_hosts()
        if known:
            client.load_host_keys(known)
        policy = paramiko.AutoAddPolicy() if self.cluster.allow_unknown_host else paramiko.RejectPolicy()
        client.set_missing_host_key_policy(policy)
        key_file = os.path.expanduser(self.cluster.identity_file) if self.cluster.identity_file else None
        if sock is None:
            try:
                sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
            except OSError as exc:
                message = f"cannot reach {host}:{port} ({exc.strerror or exc}); check clusters.{self.cluster.name}.host/port and the network"
                raise TransportError(message) from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            client.connect(
                host, port=port, username=user, key_filename=key_file, sock=sock, timeout=CONNECT_TIMEOUT,
                look_for_keys=key_file is None, allow_agent=True, banner_timeout=CONNECT_TIMEOUT,
                auth_timeout=CONNECT_TIMEOUT,
            )
        except paramiko.BadHostKeyException:
            raise HostKeyMismatch(host, port, known, self.host_key_advice) from None
        except paramiko.SSHException as exc:
            text = str(exc)
            if "not found in known_hosts" in text:
                message = (f"{host}:{port} is not in known_hosts ({known or '~/.ssh/known_hosts'}); connect once with ssh to verify "
                           f"and record its key, or set clusters.{self.cluster.name}.allow_unknown_host: true")
            elif isinstance(exc, paramiko.AuthenticationException):
                message = (f"authentication failed for {user}@{host}:{port}; check clusters.{self.cluster.name}.user and "
                           "identity_file (the key must be in the remote ~/.ssh/authorized_keys)")
            else:
                message = f"SSH to {host}:{port} failed: {text}"
            raise TransportError(message) from None
        except OSError as exc:
            message = f"SSH to {host}:{port} failed: {exc}"
            raise TransportError(message) from None
        transport = client.get_transport()
        transport.set_keepalive(KEEPALIVE_SECONDS)
        return client

    def warm(self) -> None:
        """Start connecting in the background (paramiko's import and key exchange overlap
        with the caller's own work); the first command waits for it."""
        def connect_quietly() -> None:
            try:
                self._connect()
            except TransportError:
                log.debug("background connect failed; the first command will report it")

        threading.Thread(target=connect_quietly, name=f"runjob-ssh-{self.cluster.name}", daemon=True).start()

    def _connect(self) -> Any:
        with self._lock:
            return self._connect_locked()

    def _connect_locked(self) -> Any:
        if self._client is not None and self._client.get_transport() and self._client.get_transport().is_active():
            return self._client
        self.close()
        cluster = self.cluster
        sock = None
        if cluster.proxy_jump:
            jump_user, jump_host, jump_port = _parse_target(cluster.proxy_jump, cluster.user)
            self._jump = self._new_client(jump_host, jump_port, jump_user)
            sock = self._jump.get_transport().open_channel("direct-tcpip", (cluster.host, cluster.port), ("127.0.0.1", 0))
        self._client = self._new_client(cluster.host, cluster.port, cluster.user, sock)
        self.connects += 1
        return self._client

    def _with_retry(self, operation: Callable[[], T], *, idempotent: bool = True) -> T:
        import paramiko

        attempts = len(BACKOFF) + 1 if idempotent else 1
        for attempt in range(attempts):
            try:
                return operation()
            except (paramiko.SSHException, EOFError, OSError) as exc:
                if isinstance(exc, (FileNotFoundError, PermissionError)):
                    raise
                self.close()
                if attempt + 1 >= attempts:
                    message = f"lost the SSH connection to {self.cluster.host}: {exc or type(exc).__name__}"
                    raise TransportError(message) from None
                log.info("SSH to %s dropped (%s); reconnecting", self.cluster.host, exc)
                time.sleep(BACKOFF[attempt])
        raise AssertionError("unreachable")

    def _sftp_client(self) -> Any:
        client = self._connect()
        if self._sftp is None:
            self._sftp = client.open_sftp()
        return self._sftp

    def close(self) -> None:
        for handle in (self._sftp, self._client, self._jump):
            if handle is not None:
                try:
                    handle.close()
                except (OSError, EOFError):
                    log.debug("ignoring an error while closing a dead SSH handle")
        self._sftp = self._client = self._jump = None

    # ------------------------------------------------------------------ commands

    def run(self, argv: Sequence[str], *, input: str | bytes | None = None, timeout: float | None = None,
            idempotent: bool = True) -> Completed:
        command = shlex.join(str(a) for a in argv)
        return self.run_shell(command, input=input, timeout=timeout, idempotent=idempotent, argv=tuple(argv))

    def run_shell(self, command: str, *, input: str | bytes | None = None, timeout: float | None = None,
                  idempotent: bool = True, argv: tuple[str, ...] | None = None) -> Completed:
        """Run a shell command line; callers build it from quoted parts only. *input* as bytes
        goes as it is (a tar stream: :mod:`runjob_core.transport.tree`)."""
        def operation() -> Completed:
            channel = self._connect().get_transport().open_session(timeout=CONNECT_TIMEOUT)
            self.commands.append(command)
            return _exec(channel, command, input, timeout, argv or (command,))

        return self._with_retry(operation, idempotent=idempotent)

    def open_stream(self, argv: Sequence[str]) -> Any:
        """Start a long-running command on this connection and return its channel (the
        push path's watcher, :mod:`runjob_core.monitor.hub`); closing the channel stops it."""
        import paramiko

        command = shlex.join(str(a) for a in argv)
        try:
            channel = self._connect().get_transport().open_session(timeout=CONNECT_TIMEOUT)
            channel.exec_command(command)
        except (paramiko.SSHException, EOFError) as exc:
            raise TransportError(f"cannot start a remote command on {self.cluster.host}: {exc}") from None
        return channel

    def home(self) -> str:
        if self._home is None:
            self._home = self._with_retry(lambda: self._sftp_client().normalize("."))
        return self._home

    def makedirs(self, path: str) -> None:
        result = self.run(["mkdir", "-p", path])
        if not result.ok:
            message = f"cannot create {path} on {self.cluster.host}: {result.stderr.strip()}"
            raise TransportError(message)

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        def operation() -> None:
            sftp = self._sftp_client()
            tmp = f"{path}.runjob-tmp"
            with sftp.open(tmp, "wb") as handle:
                handle.write(text.encode())
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)

        self._with_retry(operation)

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        # One command for the whole job folder: a tar stream on stdin, unpacked remotely.
        # On a cluster 30 ms away this is 1 round trip instead of ~20 SFTP requests.
        _tree.put_tree(self.run_shell, self.cluster.host, root, files, also_make)

    def run_with_tree(self, tree: tuple[str, dict[str, tuple[str, int]], Sequence[str]], argv: Sequence[str], *,
                      timeout: float | None = None, idempotent: bool = True) -> Completed:
        """``put_tree(*tree)`` then ``run(argv)`` as one remote command: one round trip where a
        submit wrote the job's files and then ran ``sbatch`` in two (issue 29). Raises as
        ``put_tree`` does when the files cannot be written (*argv* is then not run)."""
        return _tree.run_with_tree(self.run_shell, self.cluster.host, tree, argv, timeout=timeout, idempotent=idempotent)

    def put_file(self, local: Path, path: str) -> None:
        def operation() -> None:
            sftp = self._sftp_client()
            sftp.put(str(local), path)
            st = os.stat(local)
            sftp.utime(path, (st.st_atime, st.st_mtime))
            sftp.chmod(path, st.st_mode & 0o777)

        self._with_retry(operation)

    def get_file(self, path: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = local.with_name(f".{local.name}.part")

        def operation() -> None:
            sftp = self._sftp_client()
            sftp.get(path, str(tmp))
            attrs = sftp.stat(path)
            os.utime(tmp, (attrs.st_atime, attrs.st_mtime))
            tmp.replace(local)

        try:
            self._with_retry(operation)
        finally:
            tmp.unlink(missing_ok=True)  # a failed download leaves no partial file behind

    def stat(self, path: str) -> FileInfo | None:
        def operation() -> FileInfo | None:
            try:
                attrs = self._sftp_client().stat(path)
            except FileNotFoundError:
                return None
            return FileInfo(path, attrs.st_size or 0, attrs.st_mtime or 0)

        return self._with_retry(operation)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        def operation() -> bytes:
            try:
                handle = self._sftp_client().open(path, "rb")
            except FileNotFoundError:
                return b""
            with handle:
                handle.seek(offset)
                return handle.read(limit)

        return self._with_retry(operation)

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        # One `find` instead of a round trip per directory. NUL-separated: a file name may hold
        # newlines and tabs (never a NUL). A name that is not UTF-8 arrives with U+FFFD in it.
        result = self.run(["find", path, "-type", "f", "-printf", "%P\\0%s\\0%T@\\0"])
        if not result.ok:
            return []
        fields = result.stdout.split("\0")
        files = []
        for rel, size, mtime in zip(fields[0::3], fields[1::3], fields[2::3]):
            if rel and size.isdigit():
                files.append(FileInfo(rel, int(size), float(mtime or 0)))
        return files

    def disk_free(self, path: str) -> tuple[int, int]:
        result = self.run(["df", "-P", "-B1", path])
        lines = result.stdout.strip().splitlines()
        if not result.ok or len(lines) < 2:
            message = f"cannot read free disk of {path} on {self.cluster.host}: {result.stderr.strip()}"
            raise TransportError(message)
        fields = lines[-1].split()
        return int(fields[3]), int(fields[1])


def _exec(channel: Any, command: str, input: str | bytes | None, timeout: float | None, argv: tuple[str, ...]) -> Completed:
    channel.exec_command(command)
    if input is not None:
        channel.sendall(input if isinstance(input, bytes) else input.encode())
    channel.shutdown_write()
    out, err = bytearray(), bytearray()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        while channel.recv_ready():
            out += channel.recv(1 << 16)
        while channel.recv_stderr_ready():
            err += channel.recv_stderr(1 << 16)
        # Done at end of output *and* exit status, as OpenSSH's client: sshd may send the
        # exit status while output is still on its way (a child that outlives the shell).
        ended = channel.eof_received or channel.closed
        if ended and channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        wait = 1.0 if deadline is None else deadline - time.monotonic()
        if deadline is not None and wait <= 0:
            channel.close()
            message = f"remote command timed out after {timeout:.0f} s: {command[:200]}"
            raise TransportError(message)
        if ended:
            # Only the exit status is still to come. The channel's pipe stays readable after
            # EOF, so select would spin (hundreds of turns per command, taking a core from
            # sshd and the command itself).
            channel.status_event.wait(min(wait, 1.0))
        else:
            select.select([channel], [], [], min(wait, 1.0))
    status = channel.recv_exit_status()
    channel.close()
    if status == -1:
        # The server closed the channel without an exit status (sshd under load, a dropped
        # session): the command's outcome is unknown, so it counts as a connection error.
        raise EOFError(f"the SSH channel closed without an exit status: {command[:120]}")
    return Completed(argv, status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


