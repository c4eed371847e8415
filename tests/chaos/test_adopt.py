"""A lost store and the jobs it submitted (issue 34 item 5), on the real SLURM cluster: the
job runs on, carrying runjob's tag; a submit of the same spec follows it instead of
submitting again, and `runjob status --adopt` over another fresh store adopts it so that
watch and collect complete it. Only the runjob folder that submitted a job adopts it."""

import functools
import json
import shutil
from pathlib import Path

import pytest
import yaml

from runjob_core import lifecycle
from runjob_core.testing import run_cli, wait_until, write_clusters_yaml
from runjob_slurm import _parse
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.chaos, pytest.mark.slurm, pytest.mark.slow]
#: Runs long enough for two stores to be lost under it, then writes its one row.
JOB = """sleep 20; mkdir -p "$RUNJOB_RESULTS"; echo '{"id": 1}' > "$RUNJOB_RESULTS/out.jsonl" """


@pytest.fixture
def home(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": "adoptee", "cluster": "under-test", "command": JOB}))
    return runjob_home


runjob = functools.partial(run_cli, timeout=300)


def lose_the_store(home: Path) -> None:
    for path in (home / ".runjob").glob("state.db*"):
        path.unlink()


def the_jobs(home: Path) -> list[dict]:
    return json.loads(runjob("status", "--json", "--no-refresh", cwd=home, check=0).stdout)


def scheduler_jobs(home: Path, job_id: str) -> list[str]:
    """The scheduler's own record: SLURM jobs whose script is in this runjob job's folder."""
    context = lifecycle.open_context()
    try:
        transport = context.transport(context.clusters["under-test"])
        listed = transport.run(["sacct", "-X", "-n", "-P", "-S", "now-1hour", "-o", "JobID,State,SubmitLine%500"]).stdout
    finally:
        context.close()
    return [line.split("|")[0] for line in listed.splitlines() if f"/{job_id}/run." in line]


def test_a_lost_store_then_submit_follows_the_running_job_and_status_adopt_completes_it(home, tmp_path):
    runjob("submit", "job.yaml", "--yes", cwd=home, check=0)
    (first,) = the_jobs(home)
    taken = first["attempts"][0]["backend_job_id"]
    lose_the_store(home)

    again = runjob("submit", "job.yaml", "--yes", cwd=home, check=0)
    assert "a job with this spec's tag is running on under-test" in again.stdout + again.stderr, (again.stdout, again.stderr)
    (followed,) = the_jobs(home)
    assert followed["id"] == first["id"] and followed["attempts"][0]["backend_job_id"] == taken

    # another runjob folder (another project of the same user) sees the job and leaves it alone
    other = tmp_path / "other"
    (other / ".runjob").mkdir(parents=True)
    shutil.copy(home / ".runjob" / "clusters.yaml", other / ".runjob" / "clusters.yaml")
    elsewhere = runjob("status", "--adopt", cwd=other, check=0)
    assert f"{taken} (" in elsewhere.stderr and "not adopted: submitted from" in elsewhere.stderr, elsewhere.stderr
    assert the_jobs(other) == []

    lose_the_store(home)
    adopted = runjob("status", "--adopt", cwd=home, check=0)
    assert f"adopted as adoptee ({first['id']}), attempt 1" in adopted.stderr, adopted.stderr
    assert "cannot list" not in adopted.stderr
    runjob("watch", first["id"], cwd=home, check=0)
    runjob("collect", first["id"], cwd=home, check=0)
    (done,) = the_jobs(home)
    assert done["state"] == "COMPLETED" and [a["backend_job_id"] for a in done["attempts"]] == [taken]
    assert (home / "results" / "adoptee" / "out.jsonl").read_text().strip() == '{"id": 1}'
    nothing = runjob("status", "--adopt", cwd=home, check=0)
    # Other jobs on the shared test cluster may be listed (not adopted: another folder's); the
    # one adopted here is not offered again. Its id as a listed job, not as a substring of a tag.
    assert "nothing to adopt" in nothing.stderr or f": {taken} (" not in nothing.stderr, nothing.stderr
    found = []
    wait_until(lambda: len(found.append(scheduler_jobs(home, first["id"])) or found[-1]) >= 1, timeout=120)
    assert found[-1] == [taken]                # the scheduler ran the job once


def test_the_squeue_listing_keeps_only_runjob_tags():
    text = ("101|RUNNING|/scratch/jobs/a/rj-x1/|runjob:rj-x1:2\n"
            "102|PENDING|/home/u|someone's comment|with a pipe\n"
            "103|COMPLETING|/scratch/jobs/b/rj-y2|runjob:rj-y2:1\n"
            "104|PENDING|(null)|runjob:rj-z3:1\n")
    assert _parse.parse_tagged(text) == [("101", "RUNNING", "/scratch/jobs/a/rj-x1/", "runjob:rj-x1:2"),
                                          ("103", "RUNNING", "/scratch/jobs/b/rj-y2", "runjob:rj-y2:1"),
                                          ("104", "PENDING", None, "runjob:rj-z3:1")]


LOCAL_JOB = """while [ ! -e go ]; do sleep 0.1; done; mkdir -p "$RUNJOB_RESULTS"; echo '{"id": 1}' > "$RUNJOB_RESULTS/out.jsonl" """


def test_a_local_job_of_a_lost_store_is_followed_then_adopted(runjob_home):
    """The same on this machine: the runner's pid file is what lists it."""
    (runjob_home / "job.yaml").write_text(yaml.safe_dump({"name": "local-adoptee", "command": LOCAL_JOB}))
    runjob("submit", "job.yaml", "--yes", cwd=runjob_home, check=0)
    (first,) = the_jobs(runjob_home)
    taken = first["attempts"][0]["backend_job_id"]
    lose_the_store(runjob_home)
    again = runjob("submit", "job.yaml", "--yes", cwd=runjob_home, check=0)
    assert "a job with this spec's tag is running on local" in again.stdout + again.stderr, (again.stdout, again.stderr)
    (followed,) = the_jobs(runjob_home)
    assert (followed["id"], followed["attempts"][0]["backend_job_id"]) == (first["id"], taken)
    lose_the_store(runjob_home)
    adopted = runjob("status", "--adopt", cwd=runjob_home, check=0)
    assert f"local: {taken} (RUNNING, tag runjob:{first['id']}:1) adopted as local-adoptee" in adopted.stderr, adopted.stderr
    (runjob_home / "go").touch()
    runjob("watch", first["id"], cwd=runjob_home, check=0)
    runjob("collect", first["id"], cwd=runjob_home, check=0)
    (done,) = the_jobs(runjob_home)
    assert done["state"] == "COMPLETED" and [a["backend_job_id"] for a in done["attempts"]] == [taken]
    assert (runjob_home / "results" / "local-adoptee" / "out.jsonl").read_text().strip() == '{"id": 1}'
    runners = list((runjob_home / ".runjob" / "scratch" / "jobs" / "local-adoptee").glob("*/pod-pid.*"))
    assert len(runners) == 1                   # one runner ever started
