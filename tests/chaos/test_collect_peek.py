"""Collect while a job runs, collect again, and results keyed by job (issue 34 item 1, issue 24
item 5), through the real `runjob` command and real local processes.

A job here writes a row, then waits for a file the test creates, then writes the rest: the
test decides when "still running" ends, with no timing guess.
"""

import functools
import json
import shutil
from pathlib import Path

import pytest
import yaml

from runjob_core.testing import run_cli, wait_until

pytestmark = [pytest.mark.chaos]
ROWS = 6
GATED = f"""mkdir -p "$RUNJOB_RESULTS"
echo '{{"id": 1}}' >> "$RUNJOB_RESULTS/out.jsonl"
i=0; while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.1; i=$((i+1)); done  # 5 min at most: a failed test leaves no job behind
for i in $(seq 2 {ROWS}); do echo "{{\\"id\\": $i}}" >> "$RUNJOB_RESULTS/out.jsonl"; done"""


runjob = functools.partial(run_cli, timeout=120)


def write_job(folder: Path, name: str, command: str) -> str:
    (folder / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "cluster": "local", "command": command}))
    return f"{name}.yaml"


def rows(folder: Path) -> list[int]:
    path = folder / "out.jsonl"
    return sorted(json.loads(line)["id"] for line in path.read_text().splitlines()) if path.exists() else []


def submitted(home: Path, spec: str) -> str:
    return json.loads(runjob("submit", spec, "--yes", "--json", cwd=home, check=0).stdout)["job_id"]


def test_collect_of_a_running_job_is_a_peek_and_the_final_collect_gets_every_row(runjob_home):
    home = runjob_home
    job_id = submitted(home, write_job(home, "peeked", GATED))
    wait_until(lambda: rows(home / ".runjob" / "scratch" / "jobs" / "peeked" / job_id / "results") == [1], timeout=60)
    peek = json.loads(runjob("collect", job_id, "--json", cwd=home, check=0).stdout)
    assert peek["partial"] is True and peek["state"] in ("PENDING", "RUNNING")
    assert rows(home / "results" / "peeked") == [1]
    events = json.loads(runjob("events", job_id, "--json", cwd=home, check=0).stdout)
    assert not [e for e in events if e["kind"] in ("collected", "released")]
    (home / "go").touch()
    runjob("watch", job_id, cwd=home, check=0)
    final = json.loads(runjob("collect", job_id, "--json", cwd=home, check=0).stdout)
    assert final["partial"] is False and final["ok"]
    assert rows(home / "results" / "peeked") == list(range(1, ROWS + 1))
    report = json.loads(runjob("report", job_id, "--json", cwd=home, check=0).stdout)
    assert report["results"]["rows"] == ROWS


def test_collect_again_restores_deleted_and_changed_files(runjob_home):
    home = runjob_home
    (home / "go").touch()
    runjob("run", write_job(home, "again", GATED), "--yes", cwd=home, check=0)
    shutil.rmtree(home / "results" / "again")
    result = runjob("collect", "again", cwd=home, check=0)
    assert rows(home / "results" / "again") == list(range(1, ROWS + 1)), result.stdout
    (home / "results" / "again" / "out.jsonl").write_text('{"id": 99}\n')
    runjob("collect", "again", cwd=home, check=0)
    assert rows(home / "results" / "again") == list(range(1, ROWS + 1))


def test_a_report_shows_only_its_own_jobs_rows(runjob_home):
    home = runjob_home
    (home / "go").touch()
    runjob("run", write_job(home, "same", GATED), "--yes", cwd=home, check=0)
    first = json.loads(runjob("status", "same", "--json", cwd=home, check=0).stdout)[0]["id"]
    # A second job of the same name (another spec) that writes nothing and fails.
    runjob("run", write_job(home, "same", "exit 4"), "--yes", cwd=home, check=1)
    second = json.loads(runjob("status", "same", "--json", cwd=home, check=0).stdout)[0]["id"]
    assert second != first
    report = json.loads(runjob("report", second, "--json", cwd=home, check=0).stdout)
    assert report["results"]["rows"] == 0 and report["samples"] == []
    assert not any(step.startswith("done") for step in report["next_steps"])
    # The first job's results are still its own, where the second job's collect moved them.
    earlier = json.loads(runjob("report", first, "--json", cwd=home, check=0).stdout)
    assert earlier["results"]["rows"] == ROWS


def test_after_a_failed_collect_the_next_step_is_not_publish(runjob_home):
    home = runjob_home
    runjob("run", write_job(home, "nothing", "echo no results"), "--yes", cwd=home, check=1)
    report = json.loads(runjob("report", "nothing", "--json", cwd=home, check=0).stdout)
    assert report["job"]["state"] == "COMPLETED"
    assert not [s for s in report["next_steps"] if s.startswith(("publish", "done"))], report["next_steps"]
