"""_backend.poll on recorded squeue/sacct output: which remote commands a cycle runs, and
that a status reused from the previous cycle (unchanged squeue line) is never stale."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from runjob_core.models import Submission
from runjob_core.transport.execute import Completed
from runjob_slurm import _backend

DATA = Path(__file__).parent / "data"
CLUSTER = SimpleNamespace(name="rec", user="rjuser")


class RecordedTransport:
    """Answers squeue and sacct with the text the test sets; records every command."""

    def __init__(self) -> None:
        self.squeue = ""
        self.sacct = ""
        self.commands: list[list[str]] = []

    def run(self, argv, **_):
        argv = list(argv)
        self.commands.append(argv)
        program = _program(argv)
        if program == "squeue":
            return Completed(tuple(argv), 0, self.squeue, "")
        if program == "sacct":
            asked = set(argv[argv.index("-j") + 1].split(","))
            rows = [line for line in self.sacct.splitlines() if line.split("|", 1)[0].split(".")[0] in asked]
            return Completed(tuple(argv), 0, "\n".join(rows) + "\n", "")
        raise AssertionError(f"unexpected remote command {argv}")

    def programs(self) -> list[str]:
        return [_program(argv) for argv in self.commands]


def _program(argv: list[str]) -> str:
    # squeue/sacct run as `env SLURM_TIME_FORMAT=%s squeue ...`
    return next(word for word in argv if word != "env" and "=" not in word)


class Context:
    def __init__(self, transport: RecordedTransport) -> None:
        self._transport = transport
        self._scratch: dict = {}

    def transport(self, cluster):
        return self._transport

    def scratchpad(self, owner: str) -> dict:
        return self._scratch.setdefault(owner, {})


def submission(backend_job_id: str) -> Submission:
    return Submission(job_id=f"rj-{backend_job_id}", attempt=1, backend="slurm", cluster="rec",
                      backend_job_id=backend_job_id, tag=f"runjob:{backend_job_id}", job_dir="/s", workdir="/s",
                      log_path="/s/log", results_dir="/s/r", checkpoint_dir="/s/c", progress_path="/s/p",
                      submitted_at=time.time() - 3600, source="test")


def line(job_id: str, state: str, reason: str, elapsed: str = "0:00", partition: str = "debug") -> str:
    nodes = "cpu01" if state == "RUNNING" else ""
    return f"{job_id}|{job_id}|{state}|{reason}|N/A|N/A|{elapsed}|{nodes}|{partition}||"


def test_unchanged_lines_reuse_status_and_changes_are_seen():
    transport = RecordedTransport()
    context = Context(transport)
    subs = [submission("101"), submission("102"), submission("103")]
    transport.squeue = "\n".join([line("101", "PENDING", "PartitionDown", partition="maint"),
                                  line("102", "PENDING", "Priority"), line("103", "RUNNING", "None", "0:05")]) + "\n"
    first = _backend.poll(subs, CLUSTER, context)
    assert first["101"].state == "PENDING" and "maint" in first["101"].reason  # diagnosed hint
    assert first["103"].state == "RUNNING" and first["103"].node == "cpu01"

    # Same lines: the same statuses, still one squeue and no sacct.
    transport.commands.clear()
    second = _backend.poll(subs, CLUSTER, context)
    assert second == first and second["101"] is first["101"]
    assert transport.programs() == ["squeue"]

    # 102 starts, 103's clock moves, 101 still waits: each changed line is parsed again.
    transport.squeue = "\n".join([line("101", "PENDING", "PartitionDown", partition="maint"),
                                  line("102", "RUNNING", "None", "0:01"), line("103", "RUNNING", "None", "0:10")]) + "\n"
    third = _backend.poll(subs, CLUSTER, context)
    assert third["101"] is first["101"]
    assert third["102"].state == "RUNNING" and third["102"].reason is None

    # 103 leaves the queue: sacct is asked about it alone and has the exit code.
    transport.squeue = "\n".join([line("101", "PENDING", "PartitionDown", partition="maint"),
                                  line("102", "RUNNING", "None", "0:01")]) + "\n"
    transport.sacct = "103|103|FAILED|3:0|NonZeroExitCode|1796230793|1796230803|cpu01|00:00:10\n"
    transport.commands.clear()
    fourth = _backend.poll(subs, CLUSTER, context)
    assert (fourth["103"].state, fourth["103"].exit_code) == ("FAILED", 3)
    sacct_calls = [argv for argv in transport.commands if "sacct" in argv]
    assert sacct_calls and all(argv[argv.index("-j") + 1] == "103" for argv in sacct_calls)

    # 101 disappears and comes back with another reason (requeued): not the old status.
    transport.squeue = line("101", "PENDING", "JobHeldUser") + "\n" + line("102", "RUNNING", "None", "0:01") + "\n"
    fifth = _backend.poll(subs[:2], CLUSTER, context)
    assert fifth["101"].state == "PENDING" and "JobHeldUser" in fifth["101"].reason


def test_finished_line_in_squeue_is_never_reused():
    # squeue still lists a job as COMPLETED while sacct lags: the status depends on sacct,
    # so it is worked out again next cycle rather than taken from the memo.
    transport = RecordedTransport()
    context = Context(transport)
    subs = [submission("201")]
    transport.squeue = "201|201|COMPLETED|None|1796230793|1796230800|0:07|cpu01|debug||\n"
    transport.sacct = "201|201|RUNNING|0:0|None|1796230793|Unknown|cpu01|00:00:07\n"
    first = _backend.poll(subs, CLUSTER, context)
    assert first["201"].state == "RUNNING" and "waiting for sacct" in first["201"].reason
    transport.sacct = "201|201|COMPLETED|0:0|None|1796230793|1796230800|cpu01|00:00:07\n"
    second = _backend.poll(subs, CLUSTER, context)
    assert (second["201"].state, second["201"].exit_code) == ("COMPLETED", 0)
