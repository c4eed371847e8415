"""The machine behind a fake RunPod pod: a real OpenSSH sshd on a loopback port.

Each running fake pod is an ``sshd -D`` under a bash that is PID 1 of its own PID and
mount namespace (``unshare --pid --fork --mount-proc``), so that, as on a real pod:

* ``/proc/1/environ`` holds the pod's environment (``PUBLIC_KEY``, ``RUNPOD_POD_ID``, the
  ``env`` given at creation), while SSH sessions get sshd's clean login environment;
* the pod's disk is its own: the container folder (or the pod's volume) is bind-mounted
  on the workspace path, so two pods never see each other's ``/workspace``;
* stopping the pod kills everything in it, detached jobs included (the namespace's init
  dies), which is what a reclaimed or stopped pod does to a job.

Only the public key injected as ``PUBLIC_KEY`` may log in; each pod gets its own host key.
Processes are started through :func:`runjob_core.transport.execute.run` (detached, own session) and
killed by process group.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path

from runjob_core.transport import execute

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")


def can_run() -> str | None:
    """Why fake pods cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "fake RunPod pods need root (sshd as PID 1 of a namespace)"
    if not os.path.exists(SSHD):
        return f"{SSHD} is missing (apt-get install openssh-server; scripts/test-cluster.sh does)"
    if not shutil.which("unshare") or not shutil.which("ssh-keygen"):
        return "unshare (util-linux) or ssh-keygen is missing"
    probe = execute.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], timeout=30)
    if not probe.ok:
        return f"cannot make a PID/mount namespace here ({probe.stderr.strip()[:120]})"
    return None


def free_port(avoid: set[int] = frozenset()) -> int:
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


def make_host_key(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / "ssh_host_ed25519_key"
    for old in (key, key.with_suffix(".pub")):
        old.unlink(missing_ok=True)
    result = execute.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fake-runpod-pod", "-f", str(key)], timeout=30)
    if not result.ok:
        raise RuntimeError(f"ssh-keygen failed: {result.stderr.strip()}")
    return key


class PodMachine:
    """One sshd in its own namespaces; :meth:`start` again after :meth:`kill` gives a new port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port: int | None = None
        self.pid: int | None = None
        self.ports_used: set[int] = set()

    @property
    def host_key(self) -> Path:
        return self.folder / "hostkeys" / "ssh_host_ed25519_key"

    def host_key_line(self) -> str:
        return self.host_key.with_suffix(".pub").read_text().split()[1]

    def start(self, *, env: dict[str, str], authorized_keys: str, mounts: list[tuple[Path, str]]) -> int:
        if not self.host_key.exists():
            make_host_key(self.host_key.parent)
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        port = free_port(self.ports_used)
        self.ports_used.add(port)
        keys = self.folder / "authorized_keys"
        keys.write_text(authorized_keys)
        keys.chmod(0o600)
        config = self.folder / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\nPidFile none\n"
            f"AuthorizedKeysFile {keys}\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n"
            "PrintMotd no\nSubsystem sftp internal-sftp\nMaxStartups 50:30:100\nMaxSessions 50\nLogLevel INFO\n"
        )
        check = execute.run([SSHD, "-t", "-f", str(config)], timeout=30)
        if not check.ok:
            raise RuntimeError(f"sshd -t rejected {config}: {check.stderr.strip()}")
        env = {**env, "RUNPOD_TCP_PORT_22": str(port)}
        binds: list[str] = []
        for source, target in mounts:
            source.mkdir(parents=True, exist_ok=True)
            Path(target).mkdir(parents=True, exist_ok=True)
            binds += [str(source), target]
        # PID 1 of the namespace is a bash holding exactly the pod's environment, as a pod's
        # start script does (not sshd itself: its process title overwrites /proc/1/environ).
        script = 'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; exec "$@"'
        init = '"$0" -D -e -f "$1" & wait'
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--propagation", "private",
                "sh", "-c", script, "fakepod", *binds, "--",
                "env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "-c", init, SSHD, str(config)]
        started = execute.run(argv, detach=True, output_path=str(self.folder / "sshd.log"))
        self.pid, self.port = started.pid, port
        self._wait_listening(port)
        return port

    def _wait_listening(self, port: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.pid is not None and not _alive(self.pid):
                log = (self.folder / "sshd.log").read_text(errors="replace")[-400:]
                raise RuntimeError(f"fake pod sshd exited at start: {log}")
            with socket.socket() as sock:
                sock.settimeout(0.5)
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.02)
        raise RuntimeError(f"fake pod sshd did not listen on {port} within 30 s")

    def kill(self) -> None:
        """Kill the pod's sshd and, with it (namespace init), everything running in the pod."""
        pid, self.pid, self.port = self.pid, None, None
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.01)

    @property
    def running(self) -> bool:
        return self.pid is not None and _alive(self.pid)


def _alive(pid: int) -> bool:
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Not our child (or already reaped): ask the kernel whether it still exists.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return done == 0
