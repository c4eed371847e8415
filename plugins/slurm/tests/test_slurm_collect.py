"""Collect stays inside results/<name>/ whatever the job names its files (issue 19, item 3)."""

import os
import secrets
from pathlib import Path

import pytest

from runjob_core import lifecycle
from runjob_core.testing import BackendContract, write_clusters_yaml
from runjob_slurm.testing import slurm_cluster_config

pytestmark = [pytest.mark.slurm]


@pytest.fixture
def ctx(runjob_home, slurm_env):
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml", [slurm_cluster_config(slurm_env, name="under-test")])
    context = lifecycle.open_context()
    yield context
    context.close()


HOSTILE = r"""cd "$RUNJOB_RESULTS" || exit 1
echo '{"id": 1}' > out.jsonl
mkdir -p "$(printf 'x\n..')" && echo escaped > "$(printf 'x\n..')/escaped.txt"
echo '{"id": 2}' > "$(printf 'new\nline.jsonl')"
echo dash > ./-dash.txt
echo bad > "$(printf 'bad\377.txt')"
ln -s /etc/passwd link.txt
"""


def test_odd_names_are_collected_inside_the_folder_or_skipped_with_a_finding(ctx, runjob_home):
    name = f"hostile-{secrets.token_hex(3)}"
    job = BackendContract().job_spec(name, HOSTILE)
    row, _ = lifecycle.submit(ctx, job, lifecycle.cluster_for(ctx, job))
    assert BackendContract()._wait_terminal(ctx, row.id).state == "COMPLETED"
    collected = lifecycle.collect(ctx, ctx.store.get_job(row.id))
    assert collected.ok, collected.problems
    dest = runjob_home / "results" / name
    # Nothing outside results/<name>/, nothing half-written anywhere.
    assert sorted(p.name for p in (runjob_home / "results").iterdir()) == [name]
    everything = [p.relative_to(runjob_home / "results").as_posix() for p in (runjob_home / "results").rglob("*")]
    assert not [p for p in everything if p.endswith(".part")], everything
    assert (dest / "out.jsonl").read_text() == '{"id": 1}\n'
    assert (dest / "x\n.." / "escaped.txt").read_text() == "escaped\n"
    assert (dest / "new\nline.jsonl").read_text() == '{"id": 2}\n'
    assert (dest / "-dash.txt").read_text() == "dash\n"
    assert not (dest / "link.txt").exists()  # a symlink out of the folder is not followed
    [results] = [a for a in collected.artifacts if a.kind == "results"]
    assert results.rows == 2
    skipped = [a for a in collected.artifacts if a.kind == "problem" and a.source == "runjob-slurm"]
    assert len(skipped) == 1 and "not UTF-8" in skipped[0].data["message"], skipped
    assert not any(os.fsencode(p.name).endswith(b"\xff.txt") for p in dest.iterdir())
