"""The cluster transport of a RunPod cluster: one pod per job behind one Transport.

Today's core asks for one transport per cluster and stages a job's files through it
*before* ``runjob_submit``, when the job has no pod yet. This transport bridges that:

* a path names its job (``<scratch>/jobs/<name>/<job id>/...``,
  ``<scratch>/logs/<name>.<job id>.<n>.out``; the shared ``jobs/<name>/work`` folder and
  anything else belong to the attempt being submitted, ``context.current``);
* writes for a job that has no pod yet are queued, and replayed onto the pod by
  :meth:`PodRouter.flush` once it runs;
* reads and commands go to the job's pod over SSH (:mod:`runjob_runpod._ssh`), one
  connection per pod, kept for the command's life;
* once a job's pod is gone, reads are served from the local copy runjob made of the
  job's log, progress and results when the job ended (``_state.mirror_root``).

When the core gives a backend a transport per submission (issue 13) this module shrinks
to the queue-free part: a pod's transport is then just :func:`_ssh.connect`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runjob_core.errors import TransportError
from runjob_core.execute import Completed
from runjob_core.transport import FileInfo, LocalTransport, Transport
from runjob_runpod import _ssh, _state

_JOB_PATH = re.compile(r"/jobs/[^/]+/(rj-[A-Za-z0-9]+)(?:/|$)")
_LOG_PATH = re.compile(r"/logs/[^/]+\.(rj-[A-Za-z0-9]+)\.\d+\.out$")


class PodRouter(Transport):
    def __init__(self, cluster, settings, context) -> None:
        self.cluster = cluster
        self.settings = settings
        self.context = context
        self.label = f"runpod {cluster.name} (one pod per job)"
        self._pods: dict[str, _ssh.PodSSH] = {}
        self._records: dict[str, _state.PodRecord] = {}
        self._queued: dict[str, list[Callable[[Transport], None]]] = {}
        self._local = LocalTransport()

    # ------------------------------------------------------------------ routing

    def job_of(self, path: str) -> str | None:
        for pattern in (_JOB_PATH, _LOG_PATH):
            match = pattern.search(path)
            if match:
                return match.group(1)
        current = getattr(self.context, "current", None)
        return current.job_id if current is not None else None

    def remember(self, record: _state.PodRecord) -> None:
        self._records[record.job_id] = record

    def record(self, job_id: str) -> _state.PodRecord | None:
        record = self._records.get(job_id)
        if record is None:
            record = _state.latest_for_job(self.context.state_dir, job_id)
            if record is not None:
                self._records[job_id] = record
        return record

    def pod_transport(self, record: _state.PodRecord) -> _ssh.PodSSH:
        """The (cached) SSH connection to the pod of *record*."""
        from runjob_runpod._api import Pod

        cached = self._pods.get(record.pod_id)
        if cached is not None and (cached.cluster.host, cached.cluster.port) == (record.ssh_host, record.ssh_port):
            return cached
        if cached is not None:
            cached.close()
        pod = Pod(id=record.pod_id, name=record.pod_name, status="RUNNING", actions=(), cost_per_hour=record.cost_per_hour,
                  gpu_id=record.gpu_id, gpu_count=record.gpu_count, ssh_host=record.ssh_host, ssh_port=record.ssh_port,
                  ssh_user="root", data_center=None, created_at=None, started_at=None, uptime=None)
        transport = _ssh.connect(self.cluster, self.settings.identity_file, pod, self.context.state_dir)
        self._pods[record.pod_id] = transport
        return transport

    def drop(self, pod_id: str) -> None:
        transport = self._pods.pop(pod_id, None)
        if transport is not None:
            transport.close()

    def _target(self, path: str) -> tuple[Transport | None, str]:
        """Where *path* lives now: (the pod's transport, path), (local, mirror path), or
        (None, path) when the job has no pod yet."""
        job_id = self.job_of(path)
        if job_id is None:
            message = (f"{path} on RunPod cluster {self.cluster.name!r} belongs to no job: a RunPod cluster has a machine "
                       "only while a job runs on it")
            raise TransportError(message)
        record = self.record(job_id)
        current = getattr(self.context, "current", None)
        if current is not None and current.job_id == job_id and (record is None or record.attempt < current.attempt):
            return None, path  # the attempt being submitted has no pod yet (an earlier one may have had)
        if record is None or (record.live and not record.ssh_host):
            return None, path
        if record.live and not record.harvested:
            return self.pod_transport(record), path
        return self._local, str(_state.mirror_root(self.context.state_dir, job_id)) + path

    # ------------------------------------------------------------------ queue

    def _queue(self, path: str, operation: Callable[[Transport], None]) -> bool:
        target, _ = self._target(path)
        if target is not None:
            return False
        job_id = self.job_of(path)
        self._queued.setdefault(job_id, []).append(operation)
        return True

    def flush(self, job_id: str, transport: Transport) -> int:
        """Replay the writes queued for *job_id* onto its pod; return how many."""
        operations = self._queued.pop(job_id, [])
        for operation in operations:
            operation(transport)
        return len(operations)

    def discard(self, job_id: str) -> None:
        self._queued.pop(job_id, None)

    # ------------------------------------------------------------------ Transport

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True) -> Completed:
        current = getattr(self.context, "current", None)
        record = self.record(current.job_id) if current is not None else None
        if record is None or not record.live or not record.ssh_host:
            message = (f"RunPod cluster {self.cluster.name!r} has no machine to run {argv[0] if argv else 'a command'} on: "
                       "a pod exists only while a job runs")
            raise TransportError(message)
        return self.pod_transport(record).run(argv, input=input, timeout=timeout, idempotent=idempotent)

    def home(self) -> str:
        return "/root"

    def expand(self, path: str) -> str:
        # Never dial a pod to expand a path: scratch_path is absolute on a pod.
        if path.startswith("/"):
            return path
        return "/root/" + path.removeprefix("~").lstrip("/")

    def makedirs(self, path: str) -> None:
        if not self._queue(path, lambda t: t.makedirs(path)):
            target, real = self._target(path)
            target.makedirs(real)

    def put_text(self, path: str, text: str, mode: int = 0o644) -> None:
        if not self._queue(path, lambda t: t.put_text(path, text, mode)):
            target, real = self._target(path)
            target.put_text(real, text, mode)

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        files = dict(files)
        if not self._queue(root, lambda t: t.put_tree(root, files, also_make=also_make)):
            target, real = self._target(root)
            target.put_tree(real, files, also_make=also_make)

    def put_file(self, local: Path, path: str) -> None:
        if not self._queue(path, lambda t: t.put_file(local, path)):
            target, real = self._target(path)
            target.put_file(local, real)

    def get_file(self, path: str, local: Path) -> None:
        target, real = self._require(path)
        target.get_file(real, local)

    def stat(self, path: str) -> FileInfo | None:
        target, real = self._target(path)
        return None if target is None else target.stat(real)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        target, real = self._target(path)
        return b"" if target is None else target.read_from(real, offset, limit)

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        target, real = self._target(path)
        return [] if target is None else target.listdir_recursive(real)

    def disk_free(self, path: str) -> tuple[int, int]:
        target, real = self._require(path)
        return target.disk_free(real)

    def _require(self, path: str) -> tuple[Transport, str]:
        target, real = self._target(path)
        if target is None:
            raise TransportError(f"the job of {path} has no pod yet")
        return target, real

    def close(self) -> None:
        for transport in self._pods.values():
            transport.close()
        self._pods.clear()


def router_of(context: Any, cluster: Any) -> PodRouter:
    transport = context.transport(cluster)
    if not isinstance(transport, PodRouter):
        raise TransportError(f"cluster {cluster.name!r} is not served by the RunPod transport")
    return transport
