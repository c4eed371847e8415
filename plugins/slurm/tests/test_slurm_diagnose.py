"""_diagnose against sbatch's real rejections (tests/data/sbatch_*.txt, README.md there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runjob_slurm import _diagnose as D
from runjob_slurm import _parse as P

DATA = Path(__file__).parent / "data"
PARTITIONS = P.parse_partitions((DATA / "sinfo_partitions.txt").read_text())
ACCOUNTS = D.parse_accounts((DATA / "sacctmgr_assoc.txt").read_text())


def read(name: str) -> str:
    path = DATA / name
    return path.read_text() if path.exists() else ""


def explain(case: str, requested: dict, **kwargs) -> str:
    options = {"cluster_name": "della", "partitions": PARTITIONS, "accounts": ACCOUNTS, "requested": requested} | kwargs
    return D.diagnose(read(f"sbatch_{case}.txt"), read(f"sbatch_test_only_{case}.txt"), **options)


# case, what runjob asked for, words the message must contain
CASES = [
    ("bad_partition", {"partition": "gpux"}, ["partition 'gpux' does not exist on della", "debug (default), gpu, maint (down)",
                                             "resources.partition"]),
    ("bad_account", {"account": "bogus"}, ["account 'bogus'", "della", "your accounts: other, research", "resources.account"]),
    ("bad_gres", {"gpus": 1, "gpu_type": "foo"}, ["foo", "GRES", "gpu:h100:2", "gpu_type to one of: h100"]),
    ("gres_too_many", {"partition": "gpu", "gpus": 3, "gpu_type": "h100"}, ["partition 'gpu'", "at most 2 GPUs", "3 were asked"]),
    ("gres_on_debug", {"gpus": 1}, ["default partition 'debug'", "no GPUs", "partition with GPUs: gpu"]),
    ("mem_too_big", {"mem": "100G"}, ["--mem=100G", "16000 MB", "resources.mem to at most 16000M"]),
    ("bad_qos", {"qos": "bogus"}, ["QOS 'bogus'", "della", "resources.qos"]),
    ("bad_time", {"time": "abc"}, ["time 'abc'", "HH:MM:SS", "resources.time"]),
    ("cpus_too_many", {"partition": "gpu", "cpus": 64}, ["at most 8 CPUs", "64 were asked", "resources.cpus"]),
]


@pytest.mark.parametrize("case,requested,words", CASES, ids=[c[0] for c in CASES])
def test_rejection_fixtures(case, requested, words):
    message = explain(case, requested)
    for word in words:
        assert word in message, message
    assert "\n" not in message


def test_sbatch_stderr_alone_is_enough():
    message = D.diagnose(read("sbatch_bad_partition.txt"), None, cluster_name="della", partitions=None, accounts=None,
                         requested={})
    assert "partition 'gpux' does not exist on della" in message


def test_partitions_as_plain_names():
    message = explain("bad_partition", {"partition": "gpux"}, partitions=["debug*", "gpu"])
    assert "partitions: debug (default), gpu." in message


def test_account_without_any_association():
    message = explain("bad_account", {"account": "bogus"}, accounts=[])
    assert "no SLURM account association" in message
    assert "sacctmgr -n -P show assoc" in explain("bad_account", {"account": "bogus"}, accounts=None)


def test_gpu_type_the_partition_lacks():
    message = D.diagnose("sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
                         None, cluster_name="della", partitions=PARTITIONS, accounts=ACCOUNTS,
                         requested={"partition": "gpu", "gpus": 1, "gpu_type": "a100"})
    assert "no 'a100' GPUs (only h100)" in message and "resources.gpu_type" in message


def test_time_over_partition_limit_when_enforced():
    # EnforcePartLimits=ALL clusters reject at submission (text seen on public clusters).
    stderr = "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)\n"
    message = D.diagnose(stderr, None, cluster_name="della", partitions=PARTITIONS, accounts=ACCOUNTS,
                         requested={"partition": "gpu", "time": "2h"})
    assert "partition 'gpu'" in message and "1:00:00" in message and "debug" in message
    assert "resources.time to at most 1:00:00" in message


def test_qos_policy_names_the_limit():
    stderr = ("sbatch: error: QOSMaxGRESPerUser\nsbatch: error: Batch job submission failed: Job violates "
              "accounting/QOS policy (job submit limit, user's size and/or time limits)\n")
    message = D.diagnose(stderr, None, cluster_name="della", partitions=PARTITIONS, accounts=ACCOUNTS, requested={})
    assert "QOSMaxGRESPerUser" in message and "della" in message


def test_controller_down():
    stderr = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
    message = D.diagnose(stderr, None, cluster_name="della", partitions=None, accounts=None, requested={})
    assert "did not answer" in message and "try again" in message


def test_unknown_text_is_passed_on_verbatim():
    stderr = "sbatch: error: Batch job submission failed: Something new happened\n"
    message = D.diagnose(stderr, None, cluster_name="della", partitions=None, accounts=None, requested={})
    assert message == "sbatch rejected the job on della: sbatch: error: Batch job submission failed: Something new happened"


def test_accounts_helpers():
    assert D.accounts_argv("rjuser") == ["sacctmgr", "-n", "-P", "show", "assoc", "user=rjuser", "format=account,partition"]
    assert ACCOUNTS == ["other", "research"]
    assert D.parse_accounts("research|gpu\nresearch|debug\nother|\n\n") == ["research", "other"]


# ----------------------------------------------------------------------------- pending reasons

STUCK = ["PartitionTimeLimit", "PartitionConfig", "PartitionNodeLimit", "DependencyNeverSatisfied", "JobHeldUser",
         "JobHeldAdmin", "job requeued in held state", "QOSMaxWallDurationPerJobLimit", "AssocGrpCPUMinutesLimit",
         "AssocMaxCpuPerJobLimit", "BadConstraints"]
WAITING_ON_OTHERS = ["QOSMaxJobsPerUserLimit", "QOSGrpGRES", "AssocGrpJobsLimit", "AssocMaxJobsLimit", "PartitionDown",
                     "ReqNodeNotAvail, UnavailableNodes:cpu01",
                     "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"]


@pytest.mark.parametrize("reason", STUCK + WAITING_ON_OTHERS)
def test_diagnose_pending_explains(reason):
    message = D.diagnose_pending(reason)
    assert message and len(message) > 40
    assert D.pending_is_stuck(reason) == (reason in STUCK)


@pytest.mark.parametrize("reason", [None, "None", "Priority", "Resources", "BeginTime", "Dependency"])
def test_diagnose_pending_ordinary(reason):
    assert D.diagnose_pending(reason) is None
    assert not D.pending_is_stuck(reason)


def test_diagnose_pending_fixes():
    assert "scontrol release" in D.diagnose_pending("JobHeldUser")
    assert "scancel" in D.diagnose_pending("DependencyNeverSatisfied")
    message = D.diagnose_pending("PartitionTimeLimit", partitions=PARTITIONS, requested={"partition": "gpu"})
    assert "partition 'gpu'" in message and "1:00:00" in message and "EnforcePartLimits" in message
    message = D.diagnose_pending("PartitionDown", partitions=PARTITIONS, requested={"partition": "maint"})
    assert "partition 'maint' is down" in message and "debug, gpu" in message
    assert "finish" in D.diagnose_pending("QOSMaxJobsPerUserLimit")


def test_every_pending_reason_in_the_fixture_is_classified():
    rows = P.parse_squeue(read("squeue_mixed.txt"))
    reasons = {row.reason for row in rows.values() if row.state == "PENDING"}
    explained = {r for r in reasons if D.diagnose_pending(r)}
    assert reasons - explained == {"BeginTime", "Resources", "Priority"}
