"""SSH to a pod: host keys pinned per pod, the job started fully detached, one status read.

*Host keys.* A pod's host key cannot be known before the pod exists. For a pod runjob
created itself, the first key it is shown is accepted (trust on first use) and pinned for
the pod's life in ``<state dir>/runpod/hostkeys/<pod id>.known_hosts`` (dropped when the
pod is released); every later
connection, even to a new address or port after a restart, must show that same key, or
it is refused. The connection itself is :class:`runjob_core.ssh.SSHTransport` (paramiko),
given the pin file as its ``known_hosts``.

*Starting a job.* RunPod's watchdog drops SSH sessions that keep descriptors open, so the
job is started with ``nohup setsid`` and every descriptor redirected, under the shared
detached-runner protocol (:mod:`runjob_core.transport.detached`: a wrapper records its pid,
writes the exit code atomically; status reads liveness first, then the exit file). Env vars given at pod creation reach only PID 1 (``/proc/1/environ``);
the job script sources them from there (``templates/runpod.sh.j2``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs

from runjob_core.errors import TransportError
from runjob_core.models import ClusterConfig
from runjob_core.transport import detached
from runjob_core.transport.ssh import SSHTransport

TIMEOUT_EXIT = detached.TIMEOUT_EXIT
KILL_GRACE = detached.KILL_GRACE
#: root's home on RunPod images: relative paths on a pod are resolved here, never by dialing.
POD_HOME = "/root"


def expand(path: str) -> str:
    if path.startswith("/"):
        return path
    return POD_HOME + "/" + path.removeprefix("~").lstrip("/") if path not in ("~", "") else POD_HOME


def pin_path(state_dir: Path, pod_id: str) -> Path:
    return state_dir / "runpod" / "hostkeys" / (re.sub(r"[^A-Za-z0-9._-]", "_", pod_id) + ".known_hosts")


def forget_pin(state_dir: Path, pod_id: str) -> None:
    """Drop the pin of a pod that is gone (its key protects nothing any more)."""
    pin_path(state_dir, pod_id).unlink(missing_ok=True)


def _pinned_key(pins: Path) -> tuple[str, str] | None:
    if not pins.is_file():
        return None
    for line in pins.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and not line.startswith("#"):
            return parts[1], parts[2]
    return None


def _address(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


class PodSSH(SSHTransport):
    """An SSH transport to one pod, its host key pinned on first contact."""

    def __init__(self, cluster: ClusterConfig, pod_id: str, pins: Path, gone: dict[str, str] | None = None) -> None:
        advice = (f"runjob pinned pod {pod_id}'s key when it created the pod ({pins}); refusing to connect: "
                  "it is not the machine runjob rented")
        super().__init__(cluster, host_key_advice=advice)
        self.pod_id = pod_id
        self.pins = pins
        #: Pods this invocation's poll found gone (id -> why): their files went with them, so
        #: reads find nothing instead of waiting on a connection to a host that vanished.
        self.gone = gone if gone is not None else {}
        self.label = f"ssh root@{cluster.host}:{cluster.port} (pod {pod_id})"

    def home(self) -> str:
        return POD_HOME

    def expand(self, path: str) -> str:
        return expand(path)

    def stat(self, path: str):
        return None if self.pod_id in self.gone else super().stat(path)

    def read_from(self, path: str, offset: int, limit: int = 8 << 20) -> bytes:
        return b"" if self.pod_id in self.gone else super().read_from(path, offset, limit)

    def listdir_recursive(self, path: str):
        return [] if self.pod_id in self.gone else super().listdir_recursive(path)

    def get_file(self, path: str, local: Path) -> None:
        if self.pod_id in self.gone:
            raise TransportError(f"pod {self.pod_id} is gone ({self.gone[self.pod_id]}): {path} went with it")
        super().get_file(path, local)


def connect(cluster: ClusterConfig, identity_file: str, pod_id: str, host: str | None, port: int | None,
            user: str | None, state_dir: Path, gone: dict[str, str] | None = None) -> PodSSH:
    """A transport to pod *pod_id* at *host*:*port*, pinning its host key."""
    if not (host and port):
        raise TransportError(f"pod {pod_id} has no direct SSH address yet")
    pins = pin_path(state_dir, pod_id)
    pins.parent.mkdir(parents=True, exist_ok=True)
    pinned = _pinned_key(pins)
    # The pin file names the pod's current address with its pinned key, so paramiko
    # checks the key whatever address or port the pod has now; with no pin yet it is
    # empty and paramiko's AutoAddPolicy writes the first key into it.
    text = f"{_address(host, port)} {pinned[0]} {pinned[1]}\n" if pinned else ""
    tmp = pins.with_suffix(".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o600)
    tmp.replace(pins)
    config = attrs.evolve(
        cluster, host=host, port=port, user=user or "root", identity_file=identity_file,
        known_hosts=str(pins), allow_unknown_host=pinned is None, proxy_jump=None,
    )
    return PodSSH(config, pod_id, pins, gone)


# ---------------------------------------------------------------------- job control


@attrs.frozen
class JobFiles(detached.RunnerFiles):
    """The files of one attempt on the pod: the runner's, plus the script and the log."""

    script: str = ""
    log: str = ""


def start_command(files: JobFiles, workdir: str, time_limit: int | None) -> str:
    """The shell line that starts the job detached and returns at once."""
    return detached.start_command(files, ["bash", files.script], workdir=workdir, log=files.log, time_limit=time_limit)


def status_command(files: JobFiles) -> str:
    """One command: whether the wrapper lives (read first), exit code, cancel marker, log size."""
    return detached.status_command(files, files.log)


RemoteState = detached.RunnerState
parse_status = detached.parse_status
cancel_command = detached.cancel_command
