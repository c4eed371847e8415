"""The public Python API (runjob_core.api), end to end on the local backend."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runjob_core import api

EXAMPLES = Path(__file__).resolve().parents[1] / "runjob_core" / "data" / "examples"


def test_the_sweep_example_runs_three_points_and_prints_the_table(runjob_home):
    for name in ("hello.yaml", "hello.py", "sweep.py"):
        shutil.copy(EXAMPLES / name, runjob_home / name)
    result = subprocess.run([sys.executable, "sweep.py"], cwd=runjob_home, capture_output=True, text=True, timeout=300,
                            env={**os.environ})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    table = {line.split()[0]: line.split()[1:] for line in lines[1:4]}
    # hello.py drops a carry on ids 3, 10, 17: known scores per point.
    assert table == {"hello-q5": ["COMPLETED", "5", "0.800"], "hello-q10": ["COMPLETED", "10", "0.900"],
                     "hello-q20": ["COMPLETED", "20", "0.850"]}
    assert lines[4] == "mean over 3 points: 0.850"
    for n in (5, 10, 20):
        rows = (runjob_home / "results" / f"hello-q{n}" / "results.jsonl").read_text().splitlines()
        assert sorted(json.loads(r)["id"] for r in rows) == list(range(n))


def test_submit_runs_preflight_like_the_cli(runjob_home):
    job = api.job_from_dict({"name": "refused", "command": "true", "resources": {"time": "1m"},
                             "params": {"num_samples": 1000, "throughput_per_s": 1}, "resume": {"auto": False}},
                            base_dir=runjob_home)
    with api.open() as rj:
        assert rj.plan(job).refused
        with pytest.raises(api.RefusedError, match="pre-flight refused"):
            rj.submit(job)
        assert rj.jobs() == []
        ref = rj.submit(job, force=True)
        assert rj.wait([ref], timeout=120)[0].ok


def test_run_collects_and_reports(runjob_home):
    shutil.copy(EXAMPLES / "hello.py", runjob_home / "hello.py")
    base = api.load_job(EXAMPLES / "hello.yaml")
    job = api.variant(base, name="hello-lib", params={"questions": 4}, workdir=str(runjob_home))
    assert job.params["questions"] == 4 and job.name == "hello-lib"
    with api.open() as rj:
        result = rj.run(job)
        assert result.ok and result.state.attempts == 1 and result.collected.dest == Path("results/hello-lib")
        assert result.report["job"]["state"] == "COMPLETED"
        assert rj.status("hello-lib").state == "COMPLETED"


def test_a_bad_variant_fails_before_anything_is_submitted(runjob_home):
    base = api.job_from_dict({"name": "base", "command": "true"}, base_dir=runjob_home)
    with pytest.raises(api.ConfigError, match=r"\$\.resources"):
        api.variant(base, resources={"gpuz": 1})
