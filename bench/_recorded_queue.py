"""A monitor over N queued SLURM jobs whose squeue answer is recorded output (no cluster).

Used by bench_cycle_recorded.py (the Python cost of a cycle at 10,000 jobs, more than the
shared test cluster can hold) and by tests/test_cycle_memo.py. The jobs are real rows in a
real store; only the transport is replaced, by one that answers ``squeue`` with the lines
recorded on the test cluster (bench/data/squeue_poll_pending.txt), renumbered per job.
"""

from __future__ import annotations

import time
from pathlib import Path

from runjob_core.transport.execute import Completed

DATA = Path(__file__).parent / "data" / "squeue_poll_pending.txt"
#: Other users' and finished jobs in the same answer (squeue -u lists all of the user's).
OTHERS = 5


def recorded_lines() -> list[str]:
    return [line for line in DATA.read_text().splitlines() if line and not line.startswith("#")]


def squeue_text(job_ids: list[str]) -> str:
    lines = recorded_lines()
    pending = [line for line in lines if "|PENDING|" in line][0]
    running = [line for line in lines if "|RUNNING|" in line]
    rest = pending.split("|", 2)[2]
    out = [f"{i}|{i}|{rest}" for i in job_ids]
    return "\n".join(out + running[:OTHERS]) + "\n"


class RecordedTransport:
    """Answers the monitor's squeue with recorded output; files on the cluster are empty."""

    label = "recorded"

    def __init__(self, text: str) -> None:
        self.text = text
        self.commands: list[str] = []

    def run(self, argv, **_):
        self.commands.append(" ".join(argv))
        if "squeue" in argv:
            return Completed(tuple(argv), 0, self.text, "")
        raise AssertionError(f"unexpected remote command {argv}")

    def read_text(self, path: str) -> None:
        return None  # a job that just started has no progress file yet

    def read_from(self, path: str, offset: int, limit: int = 0) -> bytes:
        return b""  # nor any log

    def stat(self, path: str) -> None:
        return None

    def disk_free(self, path: str) -> tuple[int, int]:
        return 1 << 40, 1 << 41  # plenty: no disk finding

    def close(self) -> None:
        """Nothing to release."""


def queued_context(home: Path, count: int):
    """A RunContext following *count* queued jobs on the recorded cluster ``rec``."""
    import os

    from runjob_core import lifecycle
    from runjob_core.config import job_from_mapping, job_to_json, record_to_json
    from runjob_core.models import ClusterConfig, Submission
    from runjob_core.testing import write_clusters_yaml

    write_clusters_yaml(home / "clusters.yaml", [ClusterConfig(name="rec", type="slurm", host="recorded.invalid",
                                                               user="rjuser", scratch_path="/scratch")])
    os.environ["RUNJOB_HOME"] = str(home)
    os.environ["RUNJOB_CLUSTERS"] = str(home / "clusters.yaml")
    context = lifecycle.open_context()
    store = context.store
    spec = job_to_json(job_from_mapping({"name": "queued", "cluster": "rec", "command": "true"}, source="bench"))
    ids, backend_ids = [], []
    for i in range(count):
        backend_id = str(100000 + i)
        job_id = store.create_job(job_id=f"rj-q{i:06d}", name="queued", cluster="rec", backend="slurm", spec_json=spec, spec_hash="0", spec_path=None)
        attempt = store.begin_attempt(job_id)
        submission = Submission(job_id=job_id, attempt=1, backend="slurm", cluster="rec", backend_job_id=backend_id,
                                tag=attempt.tag, job_dir=f"/scratch/jobs/q/{job_id}", workdir=f"/scratch/jobs/q/{job_id}",
                                log_path=f"/scratch/logs/q.{job_id}.1.out", results_dir="/r", checkpoint_dir="/c",
                                progress_path="/p", submitted_at=time.time(), source="bench")
        store.record_submission(job_id, 1, record_to_json(submission), backend_id, submission.submitted_at)
        ids.append(job_id)
        backend_ids.append(backend_id)
    transport = RecordedTransport(squeue_text(backend_ids))
    context._transports[("rec", None)] = transport
    return context, ids, transport
