"""The transport of a RunPod cluster with no machine given: reads routed to each job's pod.

Every step of an attempt gets its pod's own transport (``runjob_transport`` with the
attempt's machine). What asks the cluster itself (``context.transport(cluster)``: a log
read by path, ``runjob logs``, a disk check) gets this one: a path names its job
(``<scratch>/jobs/<name>/<job id>/...``, ``<scratch>/logs/<name>.<job id>.<n>.out``), and
the read goes to that job's pod while it runs, or to the local copy runjob made of the
job's log, progress and results when it ended (``_state.mirror_root``) once the pod is
gone. There is no standing host: anything else, and every write, is refused in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from runjob_core.errors import TransportError
from runjob_core.transport import FileInfo, LocalTransport, Transport
from runjob_runpod import _ssh, _state

_JOB_PATH = re.compile(r"/jobs/[^/]+/(rj-[A-Za-z0-9]+)(?:/|$)")
_LOG_PATH = re.compile(r"/logs/[^/]+\.(rj-[A-Za-z0-9]+)\.\d+\.out$")


class PodRouter(Transport):
    def __init__(self, cluster, context) -> None:
        self.cluster = cluster
        self.context = context
        self.label = f"runpod {cluster.name} (a pod per job)"
        self._local = LocalTransport()

    def _no_host(self, what: str) -> TransportError:
        return TransportError(f"RunPod cluster {self.cluster.name!r} has no standing machine to {what}: "
                              "a pod exists only while a job runs on it")

    def _target(self, path: str) -> tuple[Transport | None, str]:
        match = _JOB_PATH.search(path) or _LOG_PATH.search(path)
        if match is None:
            raise self._no_host(f"read {path} from")
        record = _state.latest_for_job(self.context.state_dir, match.group(1))
        if record is None:
            return None, path
        if record.live and record.ssh_host and not record.harvested:
            from runjob_runpod import _backend

            return self.context.transport(self.cluster, _backend.machine_of(record)), path
        return self._local, str(_state.mirror_root(self.context.state_dir, record.job_id)) + path

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        raise self._no_host(f"write {root} on")

    # reads
    def stat(self, path: str) -> FileInfo | None:
        target, real = self._target(path)
        return None if target is None else target.stat(real)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        target, real = self._target(path)
        return b"" if target is None else target.read_from(real, offset, limit)

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        target, real = self._target(path)
        return [] if target is None else target.listdir_recursive(real)

    def get_file(self, path: str, local: Path) -> None:
        target, real = self._target(path)
        if target is None:
            raise TransportError(f"{path}: its job never had a pod")
        target.get_file(real, local)

    def disk_free(self, path: str) -> tuple[int, int]:
        target, real = self._target(path)
        if target is None:
            raise TransportError(f"{path}: its job has no pod")
        return target.disk_free(real)

    # no standing host: no commands, no writes
    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True):
        raise self._no_host(f"run {argv[0] if argv else 'a command'} on")

    def home(self) -> str:
        return _ssh.POD_HOME

    def expand(self, path: str) -> str:
        return _ssh.expand(path)

    def makedirs(self, path: str) -> None:
        raise self._no_host(f"create {path} on")

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        raise self._no_host(f"write {path} on")

    def put_file(self, local: Path, path: str) -> None:
        raise self._no_host(f"write {path} on")


class PodMachine(Transport):
    """The transport of one attempt's pod: SSH while the pod runs; once its job ended and
    runjob copied the log, progress and results home (and returned the pod), reads of
    those files are served from that copy, so the core's last log read, ``runjob logs``
    and collect work after the pod is gone."""

    def __init__(self, ssh: _ssh.PodSSH, cluster, context) -> None:
        self.ssh = ssh
        self.cluster = cluster
        self.context = context
        self.label = ssh.label
        self._local = LocalTransport()
        self._tag: str | None = None

    def _ended(self) -> _state.PodRecord | None:
        ended = self.context.scratchpad("runjob-runpod:ended").get(self.ssh.pod_id)
        if ended is not None:
            return ended
        # The record may have been written by another runjob process: read this pod's own
        # file (found once by a scan, then one small read per call).
        if self._tag is None:
            found = next((r for r in _state.all_records(self.context.state_dir) if r.pod_id == self.ssh.pod_id), None)
            if found is None:
                return None
            self._tag = found.tag
        record = _state.load(self.context.state_dir, self._tag)
        return record if record is not None and record.harvested and not record.live else None

    def _read_target(self, path: str) -> tuple[Transport, str]:
        record = self._ended()
        if record is None:
            return self.ssh, path
        return self._local, str(_state.mirror_root(self.context.state_dir, record.job_id)) + path

    def stat(self, path: str) -> FileInfo | None:
        target, real = self._read_target(path)
        return target.stat(real)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        target, real = self._read_target(path)
        return target.read_from(real, offset, limit)

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        target, real = self._read_target(path)
        return target.listdir_recursive(real)

    def get_file(self, path: str, local: Path) -> None:
        target, real = self._read_target(path)
        target.get_file(real, local)

    def disk_free(self, path: str) -> tuple[int, int]:
        if self._ended() is not None:
            raise TransportError(f"pod {self.ssh.pod_id} was returned after its job ended")
        return self.ssh.disk_free(path)

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None, idempotent: bool = True):
        return self.ssh.run(argv, input=input, timeout=timeout, idempotent=idempotent)

    def run_shell(self, command: str, **kwargs):
        return self.ssh.run_shell(command, **kwargs)

    def home(self) -> str:
        return _ssh.POD_HOME

    def expand(self, path: str) -> str:
        return _ssh.expand(path)

    def makedirs(self, path: str) -> None:
        self.ssh.makedirs(path)

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        self.ssh.put_text(path, text, mode)

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        self.ssh.put_tree(root, files, also_make=also_make)

    def put_file(self, local: Path, path: str) -> None:
        self.ssh.put_file(local, path)

    def warm(self) -> None:
        self.ssh.warm()

    def close(self) -> None:
        self.ssh.close()
