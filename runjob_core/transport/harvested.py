"""The copy runjob keeps of an ended attempt's files, and the transport that reads it.

A backend that rents a machine per attempt (``BackendInfo.machine_per_job``: a RunPod
pod) has its machine given back right after the attempt ends
(:mod:`runjob_core.collecting.harvest`). Before that, the core copies the attempt's log,
progress, metrics and results into ``<state dir>/attempts/<tag>/``, each file at its
remote absolute path under that folder. From then on
:meth:`~runjob_core.context.RunContext.transport_for` hands out :class:`HarvestedCopy`,
so the last log read, ``runjob logs``, the health checks, resume and collect all read the
copy, whoever reads and whenever. A ``harvested`` marker, written last, says the copy is
done (its text says what could not be copied).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from runjob_core.errors import TransportError
from runjob_core.transport import FileInfo, LocalTransport, Transport

#: Written last into an attempt's copy: its presence means the copy is final.
MARKER = "harvested"


def folder(state_dir: Path, tag: str) -> Path:
    """Where the copy of the attempt tagged *tag* lives (its files under ``files/``)."""
    return state_dir / "attempts" / re.sub(r"[^A-Za-z0-9._-]", "_", tag)


def is_harvested(state_dir: Path, tag: str) -> bool:
    return (folder(state_dir, tag) / MARKER).is_file()


def local_path(root: Path, remote: str) -> Path:
    """*remote* (an absolute path on the machine) inside the copy *root*."""
    return Path(str(root / "files") + "/" + remote.lstrip("/"))


class HarvestedCopy(Transport):
    """Reads of an ended attempt's files, served from runjob's copy; its machine is gone,
    so anything else (a command, a write) is refused in one line."""

    def __init__(self, root: Path, machine_id: str) -> None:
        self.root = root
        self.machine_id = machine_id
        self.label = f"copy of machine {machine_id}'s files ({root})"
        self._local = LocalTransport()

    def _gone(self, what: str) -> TransportError:
        return TransportError(f"machine {self.machine_id} was given back after its attempt ended; cannot {what} "
                              f"(its log, progress and results are kept in {self.root})")

    def _here(self, path: str) -> str:
        return str(local_path(self.root, path))

    def stat(self, path: str) -> FileInfo | None:
        info = self._local.stat(self._here(path))
        return None if info is None else FileInfo(path, info.size, info.mtime)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        return self._local.read_from(self._here(path), offset, limit)

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        return self._local.listdir_recursive(self._here(path))

    def get_file(self, path: str, local: Path) -> None:
        if self.stat(path) is None:
            raise TransportError(f"{path} was not among the files copied off machine {self.machine_id}")
        self._local.get_file(self._here(path), local)

    def disk_free(self, path: str) -> tuple[int, int]:
        raise self._gone(f"measure free space at {path}")

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True):
        raise self._gone(f"run {argv[0] if argv else 'a command'}")

    def run_shell(self, command: str, *, input: str | None = None, timeout: float | None = None,
                  idempotent: bool = True):
        raise self._gone("run a command")

    def home(self) -> str:
        raise self._gone("ask for its home folder")

    def expand(self, path: str) -> str:
        if path.startswith("/"):
            return path  # the attempt's paths are absolute (Layout)
        raise self._gone(f"resolve the relative path {path}")

    def makedirs(self, path: str) -> None:
        raise self._gone(f"create {path}")

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        raise self._gone(f"write {path}")

    def put_file(self, local: Path, path: str) -> None:
        raise self._gone(f"write {path}")
