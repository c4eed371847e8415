"""SSH to a pod: host keys pinned per pod, the job started fully detached, one status read.

*Host keys.* A pod's host key cannot be known before the pod exists. For a pod runjob
created itself, the first key it is shown is accepted (trust on first use) and pinned for
the pod's life in ``<state dir>/runpod/hostkeys/<pod id>.known_hosts``; every later
connection, even to a new address or port after a restart, must show that same key, or
it is refused. The connection itself is :class:`runjob_core.ssh.SSHTransport` (paramiko),
given the pin file as its ``known_hosts``.

*Starting a job.* RunPod's watchdog drops SSH sessions that keep descriptors open, so the
job is started with ``nohup setsid`` and every descriptor redirected; a wrapper records
its pid, runs the script (under ``timeout`` for a time limit) and writes the exit code to a
file atomically. Env vars given at pod creation reach only PID 1 (``/proc/1/environ``);
the job script sources them from there (``templates/runpod.sh.j2``).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import attrs

from runjob_core.errors import TransportError
from runjob_core.models import ClusterConfig
from runjob_core.transport.ssh import SSHTransport

#: The wrapper run under ``setsid``: $1 pid file, $2 exit-code file, then the command.
WRAPPER = ('echo "$$" > "$1"; rc_file="$2"; shift 2; "$@"; rc=$?; '
           'echo "$rc" > "$rc_file.tmp" && mv "$rc_file.tmp" "$rc_file"; exit "$rc"')
TIMEOUT_EXIT = 124
KILL_GRACE = 10
#: root's home on RunPod images: relative paths on a pod are resolved here, never by dialing.
POD_HOME = "/root"


def expand(path: str) -> str:
    if path.startswith("/"):
        return path
    return POD_HOME + "/" + path.removeprefix("~").lstrip("/") if path not in ("~", "") else POD_HOME


def pin_path(state_dir: Path, pod_id: str) -> Path:
    return state_dir / "runpod" / "hostkeys" / (re.sub(r"[^A-Za-z0-9._-]", "_", pod_id) + ".known_hosts")


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

    def __init__(self, cluster: ClusterConfig, pod_id: str, pins: Path) -> None:
        super().__init__(cluster)
        self.pod_id = pod_id
        self.pins = pins
        self.label = f"ssh root@{cluster.host}:{cluster.port} (pod {pod_id})"

    def home(self) -> str:
        return POD_HOME

    def expand(self, path: str) -> str:
        return expand(path)

    def _new_client(self, host, port, user, sock=None):
        try:
            return super()._new_client(host, port, user, sock)
        except TransportError as exc:
            if "does not match known_hosts" in str(exc):
                message = (f"pod {self.pod_id} at {host}:{port} showed a different host key than the one runjob pinned when "
                           f"it created the pod ({self.pins}); refusing to connect: it is not the machine runjob rented")
                raise TransportError(message) from None
            raise


def connect(cluster: ClusterConfig, identity_file: str, pod_id: str, host: str | None, port: int | None,
            user: str | None, state_dir: Path) -> PodSSH:
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
    return PodSSH(config, pod_id, pins)


# ---------------------------------------------------------------------- job control


@attrs.frozen
class JobFiles:
    """The files of one attempt on the pod."""

    job_dir: str
    script: str
    log: str
    attempt: int

    @property
    def pid(self) -> str:
        return f"{self.job_dir}/pod-pid.{self.attempt}"

    @property
    def exit(self) -> str:
        return f"{self.job_dir}/exit.{self.attempt}"

    @property
    def cancelled(self) -> str:
        return f"{self.job_dir}/cancelled.{self.attempt}"


def start_command(files: JobFiles, workdir: str, time_limit: int | None) -> str:
    """The shell line that starts the job detached and returns at once."""
    command = ["bash", files.script]
    if time_limit:
        command = ["timeout", "-k", "30", str(time_limit), *command]
    wrapper = shlex.join(["bash", "-c", WRAPPER, "runjob-pod", files.pid, files.exit, *command])
    return (f"mkdir -p {shlex.quote(files.log.rsplit('/', 1)[0])} && cd {shlex.quote(workdir)} && "
            # Braces: only the job goes to the background, not the whole && list (whose
            # shell would hold the session's descriptors until the job ends).
            f"{{ nohup setsid {wrapper} >> {shlex.quote(files.log)} 2>&1 < /dev/null & }}; "
            # Return once the wrapper recorded its pid (at most 10 s): a poll right after
            # submit then sees the job as started, never as not there yet.
            f"i=0; while [ ! -s {shlex.quote(files.pid)} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done")


def status_command(files: JobFiles) -> str:
    """One command: exit code, cancel marker, whether the wrapper lives, log size."""
    q = shlex.quote
    return (f"e=$(cat {q(files.exit)} 2>/dev/null); c=; [ -e {q(files.cancelled)} ] && c=1; "
            f"p=$(cat {q(files.pid)} 2>/dev/null); s=; "
            # /proc/<pid>/stat field 3 is the state; a zombie (Z) has ended.
            '[ -n "$p" ] && s=$(sed -e "s/^.*) //" /proc/"$p"/stat 2>/dev/null | cut -d" " -f1); '
            f"l=$(stat -c %s {q(files.log)} 2>/dev/null); "
            'echo "exit=$e cancelled=$c started=${p:+1} alive=$s log=$l"')


@attrs.frozen
class RemoteState:
    exit_code: int | None
    cancelled: bool
    started: bool
    alive: bool
    log_size: int | None


def parse_status(text: str) -> RemoteState:
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    code = fields.get("exit", "")
    state = fields.get("alive", "")
    size = fields.get("log", "")
    return RemoteState(
        exit_code=int(code) if code.lstrip("-").isdigit() else None, cancelled=fields.get("cancelled") == "1",
        started=fields.get("started") == "1", alive=bool(state) and state not in ("Z", "X"),
        log_size=int(size) if size.isdigit() else None,
    )


def cancel_command(files: JobFiles) -> str:
    """Mark the attempt cancelled, TERM its process group, KILL it after a grace period."""
    q = shlex.quote
    # No marker once the job has its exit code: a late cancel must not rename its ending.
    return (f"[ -e {q(files.exit)} ] || touch {q(files.cancelled)}; p=$(cat {q(files.pid)} 2>/dev/null); "
            '[ -n "$p" ] && kill -TERM -- -"$p" 2>/dev/null; '
            # The whole list in the background with its descriptors closed, or the session
            # would wait for the grace period.
            f'{{ [ -n "$p" ] && sleep {KILL_GRACE} && kill -KILL -- -"$p"; }} >/dev/null 2>&1 < /dev/null & '
            "true")
