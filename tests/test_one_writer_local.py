"""One writer per job, on the local backend (issue 19, item 1): a monitor killed between
recording an attempt's end and resubmitting it leaves the resume to the next runjob, which
does it (it does not start the job over as a new one)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core import config, lifecycle, monitor

RUNJOB = str(Path(sys.executable).parent / "runjob")
COMMAND = """mkdir -p "$RUNJOB_RESULTS"
if [ "$RUNJOB_ATTEMPT" = 1 ]; then echo '{"id": 1}' >> "$RUNJOB_RESULTS/out.jsonl"; exit 75; fi
echo '{"id": 2}' >> "$RUNJOB_RESULTS/out.jsonl"
"""


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, no handler catches it."""


def test_a_monitor_killed_before_resubmitting_leaves_the_resume_to_the_next_run(runjob_home, monkeypatch):
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": "halfway", "command": COMMAND}))
    context = lifecycle.open_context()
    job = config.load_job(runjob_home / "job.yaml")
    row, _ = lifecycle.submit(context, job, lifecycle.cluster_for(context, job), spec_path="job.yaml")

    def killed(*args, **kwargs):
        raise Killed

    original = lifecycle.resubmit
    monkeypatch.setattr(lifecycle, "resubmit", killed)
    with pytest.raises(Killed):
        monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    monkeypatch.setattr(lifecycle, "resubmit", original)
    assert [a.state for a in context.store.attempts(row.id)] == ["FAILED"]
    context.store.close()  # a killed process's leases are free once it is gone
    result = subprocess.run([RUNJOB, "run", "job.yaml", "--yes"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    jobs = json.loads(subprocess.run([RUNJOB, "status", "--json"], capture_output=True, text=True).stdout)
    assert [(j["id"], [a["state"] for a in j["attempts"]]) for j in jobs] == [(row.id, ["FAILED", "COMPLETED"])]
    assert [json.loads(line)["id"] for line in (Path("results") / "halfway" / "out.jsonl").read_text().splitlines()] == [1, 2]


def test_an_attempt_another_process_submitted_while_this_one_waited_is_followed_not_submitted_again(runjob_home,
                                                                                                    monkeypatch):
    # Seen on CI (team mode, two hosts): `runjob run` read the job's attempt 2 as SUBMITTING while
    # `runjob watch` on the other host was submitting it, waited for submit:<id>, then submitted
    # attempt 2 a second time from its stale row: the command ran twice.
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": "stale", "command": "sleep 30"}))
    context = lifecycle.open_context()
    try:
        job = config.load_job(runjob_home / "job.yaml")
        cluster = lifecycle.cluster_for(context, job)
        store = context.store
        row_id = store.create_job(name="stale", cluster=cluster.name, backend=cluster.type,
                                  spec_json=config.job_to_json(job), spec_hash=config.spec_hash(job), spec_path=None)
        stale = store.begin_attempt(row_id)  # what the waiting process read
        # The other process, holding submit:<id> meanwhile, submitted it.
        submitted = lifecycle._submit_attempt(context, store.get_job(row_id), job, cluster, attempt_row=stale)
        # The waiting process gets the claim with its stale row: it follows, it does not submit again,
        # even where the backend cannot find the job by its tag (there: a local job of the other host).
        monkeypatch.setattr(lifecycle, "_reattach", lambda context, row, job, cluster, attempt_row: lifecycle.new_attempt(
            context, job, cluster, job_id=row.id, n=attempt_row.n))
        followed = lifecycle._submit_attempt(context, store.get_job(row_id), job, cluster, attempt_row=stale)
        assert followed.backend_job_id == submitted.backend_job_id
        assert len(store.events(row_id, kinds=("submitted",))) == 1
        assert [a.backend_job_id for a in store.attempts(row_id)] == [submitted.backend_job_id]
    finally:
        for attempt in context.store.active_attempts():
            lifecycle.cancel(context, context.store.get_job(attempt.job_id))
        context.close()
