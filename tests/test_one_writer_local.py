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
