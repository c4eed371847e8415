"""The shared SSH connection (runjob_core.transport.agent) against the real sshd."""

import os
import stat
import time

import attrs
import pytest

from runjob_core.transport import agent as sshagent
from runjob_core.errors import TransportError
from runjob_core.testing import wait_until
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm


@pytest.fixture
def agent_env(monkeypatch, tmp_path):
    monkeypatch.setenv("RUNJOB_SSH_AGENT", "1")
    monkeypatch.setenv("RUNJOB_SSH_AGENT_IDLE", "3")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    from runjob_core.transport.agent import _folder

    return _folder()  # under tmp_path, or /tmp/runjob-agents-UID where that path is too long for a socket


def test_agent_carries_transport_calls_and_is_shared(agent_env, slurm_env):
    cluster = slurm_cluster_config(slurm_env, scratch_path=slurm_env["RUNJOB_TEST_SCRATCH"] + "/agent-test")
    first = sshagent.AgentTransport(cluster)
    assert first.run(["whoami"]).stdout.strip() == slurm_env["RUNJOB_TEST_SSH_USER"]
    root = cluster.scratch_path + "/tree"
    first.put_tree(root, {"a.txt": ("hello\n", 0o644), "sub/b.sh": ("#!/bin/sh\n", 0o755)}, also_make=[root + "/logs"])
    assert first.read_from(root + "/a.txt", 2) == b"llo\n"
    assert sorted(f.path for f in first.listdir_recursive(root)) == ["a.txt", "sub/b.sh"]
    assert first.stat(root + "/missing") is None and first.stat(root + "/a.txt").size == 6
    free, total = first.disk_free(root)
    assert 0 < free <= total
    [sock] = [p for p in agent_env.glob("*.sock") if p.stem == sshagent._key(first._config)]
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600 and stat.S_IMODE(agent_env.stat().st_mode) == 0o700
    second = sshagent.AgentTransport(cluster)
    assert second.run(["echo", "a b; $(id)"]).stdout == "a b; $(id)\n"  # quoted, one agent for both
    assert second._path == first._path
    first.close()
    second.close()
    # Idle for longer than RUNJOB_SSH_AGENT_IDLE: the agent exits and removes its socket...
    wait_until(lambda: not sock.exists(), timeout=30, what="the idle agent to exit")
    # ...and the next call starts a new one.
    assert sshagent.AgentTransport(cluster).run(["true"]).ok


def test_agent_refuses_an_unknown_host_key(agent_env, slurm_env, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cluster = attrs.evolve(slurm_cluster_config(slurm_env), known_hosts=str(empty))
    with pytest.raises(TransportError, match="not in known_hosts"):
        sshagent.AgentTransport(cluster).run(["true"])
