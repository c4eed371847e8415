"""Issue 29: a SLURM submit writes the job's files and runs sbatch in one remote command, over
a direct SSH connection and through the shared agent, and a folder that cannot be written is
still said as such (sbatch is then not run)."""

import attrs
import pytest

from runjob_core import lifecycle
from runjob_core.errors import TransportError
from runjob_core.transport import agent as sshagent
from runjob_core.transport.ssh import SSHTransport
from runjob_core.testing import BackendContract, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = pytest.mark.slurm


def _context(runjob_home, slurm_env):
    cluster = slurm_cluster_config(slurm_env, name="under-test")
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [cluster])
    return lifecycle.open_context(), cluster


def _script(transport, submission) -> bytes:
    [script] = [f.path for f in transport.listdir_recursive(submission.job_dir) if f.path.endswith(".sh") and "/" not in f.path]
    return transport.read_from(f"{submission.job_dir}/{script}", 0)


def _cancel(context):
    for job_id in {a.job_id for a in context.store.active_attempts()}:
        lifecycle.cancel(context, context.store.get_job(job_id))
    context.close()


def test_a_submit_is_one_remote_command_over_ssh(runjob_home, slurm_env, monkeypatch):
    monkeypatch.setenv("RUNJOB_SSH_AGENT", "0")
    context, cluster = _context(runjob_home, slurm_env)
    try:
        ssh = context.transport(cluster)
        assert isinstance(ssh, SSHTransport)
        job = BackendContract().job_spec("one-trip", "echo written-and-submitted")
        # The first submit of a name the store does not know also lists the cluster's tagged
        # jobs (a lost store's job of this spec is followed, not submitted twice): not timed here.
        lifecycle.submit(context, job, cluster)
        before = len(ssh.commands)
        row, submission = lifecycle.submit(context, job, cluster, new=True)
        [command] = ssh.commands[before:]
        assert "tar -x" in command and "sbatch" in command
        assert b"echo written-and-submitted" in _script(ssh, submission)  # the files went with the command
        assert submission.backend_job_id.isdigit()
    finally:
        _cancel(context)


def test_a_submit_through_the_agent_carries_the_files_with_sbatch(runjob_home, slurm_env, monkeypatch, tmp_path):
    monkeypatch.setenv("RUNJOB_SSH_AGENT", "1")
    monkeypatch.setenv("RUNJOB_SSH_AGENT_IDLE", "5")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    context, cluster = _context(runjob_home, slurm_env)
    try:
        agent = context.transport(cluster)
        assert isinstance(agent, sshagent.AgentTransport)
        job = BackendContract().job_spec("one-trip-agent", "echo through-the-agent")
        lifecycle.submit(context, job, cluster)  # the name known, as in the submit of the bench
        calls = []
        real = agent._call
        monkeypatch.setattr(agent, "_call", lambda op, **args: calls.append(op) or real(op, **args))
        row, submission = lifecycle.submit(context, job, cluster, new=True)
        assert calls == ["run"]  # the files' tar stream and sbatch in one command
        assert b"echo through-the-agent" in _script(agent, submission)
    finally:
        _cancel(context)


def test_files_that_cannot_be_written_are_said_and_nothing_is_submitted(slurm_env):
    cluster = slurm_cluster_config(slurm_env)
    ssh = SSHTransport(cluster)
    try:
        root = "/proc/runjob-cannot-write-here"
        with pytest.raises(TransportError, match=f"cannot write the job's files under {root}"):
            ssh.run_with_tree((root, {"run.sh": ("#!/bin/sh\n", 0o755)}, ()), ["echo", "submitted"])
        root = cluster.scratch_path + "/one-trip-ok"
        done = ssh.run_with_tree((root, {"a.txt": ("a\n", 0o644)}, ()), ["cat", root + "/a.txt"])
        assert done.ok and done.stdout == "a\n"  # written before the command ran
    finally:
        ssh.close()
