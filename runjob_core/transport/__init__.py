"""Moving commands and files to where a job runs: this machine, or a host over SSH.

A :class:`Transport` runs a command given as an argv list (joined with ``shlex.join``
for a remote shell, so every argument is quoted), moves files, reads a file from a byte
offset (log tailing sends only new bytes) and reports free disk. The local transport is
here; the SSH one (paramiko, imported lazily) is :mod:`runjob_core.transport.ssh`.
"""

from __future__ import annotations

import os
import shutil
import stat as stat_module
from collections.abc import Iterator, Sequence
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from runjob_core.transport import execute


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the listed root, '/'-separated
    size: int
    mtime: float


class Transport(ABC):
    """The interface every transport implements: this machine (:class:`LocalTransport`), a host
    over SSH (:class:`runjob_core.transport.ssh.SSHTransport`), the shared SSH agent
    (:mod:`runjob_core.transport.agent`), or a plugin's own (RunPod's pod SSH).

    Paths are the host's: absolute, or relative to the user's home there (:meth:`expand`).
    Every method raises :class:`~runjob_core.errors.TransportError` (one line, what to do)
    when the host cannot be reached or used; a changed host key is its subclass
    :class:`~runjob_core.errors.HostKeyMismatch`. A missing file is not an error where the
    method says so (:meth:`stat`, :meth:`read_from`). Transports are used from several
    threads of one process (the monitor, the push watcher): implementations lock their
    connection.

    Optional, and deliberately not defined here (the push path asks ``hasattr``):
    ``open_stream(argv)`` starts a long-running *argv* (the push path's watcher: it reads
    commands on its stdin and prints lines) and returns its handle, a ``subprocess.Popen``
    with byte pipes locally or a paramiko channel over SSH (:mod:`runjob_core.monitor.push`
    wraps either). A transport without it leaves the monitor to its polling.
    """

    #: Short name for messages ("local", "ssh rjuser@host:2222").
    label = "transport"

    @abstractmethod
    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True) -> execute.Completed:
        """Run *argv* where the job runs. ``idempotent=False`` (sbatch) forbids a silent
        retry after a dropped connection: the caller finds the job by its tag instead."""

    @abstractmethod
    def home(self) -> str:
        """The user's home folder on the host (asked once, then remembered)."""

    def run_shell(self, command: str, *, input: str | None = None, timeout: float | None = None,
                  idempotent: bool = True):
        """Run *command* as a shell line (``sh -c``) where the job runs. The caller quotes every
        value in it (``shlex.quote``); prefer :meth:`run` with an argv. Used for the detached
        runner's start/status/cancel text (:mod:`runjob_core.transport.detached`), which is
        one shell line for any transport."""
        return self.run(["sh", "-c", command], input=input, timeout=timeout, idempotent=idempotent)

    def expand(self, path: str) -> str:
        """Resolve ``~`` and relative paths against the user's home on the host."""
        if path == "~":
            return self.home()
        if path.startswith("~/"):
            return self.home().rstrip("/") + path[1:]
        if not path.startswith("/"):
            return self.home().rstrip("/") + "/" + path
        return path

    @abstractmethod
    def makedirs(self, path: str) -> None:
        """Create *path* and its parents; an existing folder is fine."""

    @abstractmethod
    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write *text* to *path* with *mode*, atomically (a reader never sees half a file)."""

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        """Create *root* (and *also_make*) and write *files* (relative path -> (text, mode);
        the text may be bytes, written as they are).

        A remote transport does this in one round trip; the default writes file by file.
        """
        for folder in (root, *also_make):
            self.makedirs(folder)
        for rel, (text, mode) in files.items():
            target = root.rstrip("/") + "/" + rel
            if "/" in rel:
                self.makedirs(target.rsplit("/", 1)[0])
            self.put_text(target, text, mode)

    @abstractmethod
    def put_file(self, local: Path, path: str) -> None:
        """Copy the local file *local* to *path* on the host."""

    @abstractmethod
    def get_file(self, path: str, local: Path) -> None:
        """Copy *path* on the host to the local file *local*, creating its folder."""

    @abstractmethod
    def stat(self, path: str) -> FileInfo | None:
        """Size and mtime of *path*, or ``None`` if it does not exist."""

    @abstractmethod
    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        """Return at most *limit* bytes of *path* from *offset* (empty if missing)."""

    def read_text(self, path: str) -> str | None:
        """The whole of a small text file (up to 64 MiB), or ``None`` if it does not exist."""
        data = self.read_from(path, 0, 64 << 20)
        return data.decode("utf-8", "replace") if data or self.stat(path) else None

    @abstractmethod
    def listdir_recursive(self, path: str) -> list[FileInfo]:
        """Every regular file under *path* (paths relative to it); empty if *path* is missing."""

    @abstractmethod
    def disk_free(self, path: str) -> tuple[int, int]:
        """Return (free bytes, total bytes) of the filesystem holding *path*."""

    def warm(self) -> None:
        """Start connecting in the background, if connecting is slow (SSH); optional."""

    def close(self) -> None:
        """Release connections; the transport may be used again afterwards."""


class LocalTransport(Transport):
    label = "local"

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True) -> execute.Completed:
        return execute.run(argv, input=input, timeout=timeout)

    def open_stream(self, argv: Sequence[str]):
        """Start a long-running local command with pipes (the push path's watcher)."""
        return execute.stream(argv)

    def home(self) -> str:
        return str(Path.home())

    def expand(self, path: str) -> str:
        return str(Path(os.path.expanduser(path)).absolute())

    def makedirs(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp")
        if isinstance(text, bytes):  # a put_tree entry may be bytes (a sweep array's bundle)
            tmp.write_bytes(text)
        else:
            tmp.write_text(text)
        tmp.chmod(mode)
        tmp.replace(target)

    def put_file(self, local: Path, path: str) -> None:
        shutil.copy2(local, path)

    def get_file(self, path: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, local)

    def stat(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileInfo(path, st.st_size, st.st_mtime)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                return handle.read(limit)
        except FileNotFoundError:
            return b""

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        return list(_walk_local(Path(path)))

    def disk_free(self, path: str) -> tuple[int, int]:
        probe = Path(path)
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        usage = shutil.disk_usage(probe)
        return usage.free, usage.total


def _walk_local(root: Path) -> Iterator[FileInfo]:
    if not root.is_dir():
        return
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = Path(dirpath) / name
            st = full.lstat()
            if not stat_module.S_ISREG(st.st_mode):
                continue
            yield FileInfo(full.relative_to(root).as_posix(), st.st_size, st.st_mtime)
