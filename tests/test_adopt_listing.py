"""What `runjob status --adopt` says of clusters it cannot list, and of tagged jobs it cannot
adopt (issue 34 item 5); the end-to-end cases are in tests/chaos/test_adopt.py."""

from __future__ import annotations


import attrs
import pytest

from runjob_core import adopt, hookimpl, plugins
from runjob_core.context import RunContext
from runjob_core.errors import TransportError
from runjob_core.models import BackendInfo, ClusterConfig, TaggedJob
from runjob_core.store import Store


class Silent:
    """A backend without runjob_list_tagged."""

    @hookimpl
    def runjob_backend_info(self):
        return BackendInfo(name="silent", source="silent")

    @hookimpl
    def runjob_submit(self):
        raise AssertionError("adoption never submits")


@attrs.define(eq=False)
class Lister:
    """A backend that lists what it is given, or cannot be reached."""

    jobs: list
    down: bool = False

    @hookimpl
    def runjob_backend_info(self):
        return BackendInfo(name="lister", source="lister")

    @hookimpl
    def runjob_submit(self):
        raise AssertionError("adoption never submits")

    @hookimpl
    def runjob_list_tagged(self, cluster):
        if self.down:
            raise TransportError("connection refused")
        return self.jobs


@pytest.fixture
def context(tmp_path):
    def make(lister):
        pm, _ = plugins.get_plugin_manager()
        pm.register(Silent(), name="silent")
        pm.register(lister, name="lister")
        clusters = {"quiet": ClusterConfig(name="quiet", type="silent"), "box": ClusterConfig(name="box", type="lister")}
        return RunContext(store=Store(tmp_path / "state.db"), pm=pm, clusters=clusters, state_dir=tmp_path)
    return make


def test_a_backend_that_cannot_list_or_answer_says_so_in_one_line(context):
    ctx = context(Lister([], down=True))
    found, lines = adopt.untracked(ctx, list(ctx.clusters.values()))
    assert found == []
    assert lines == ["quiet: the silent backend cannot list the jobs runjob submitted there (no runjob_list_tagged); "
                     "nothing adopted from it",
                     "box: cannot list its jobs now (connection refused); nothing adopted from it"]


def test_tagged_jobs_without_a_readable_record_are_named_with_the_reason(context, tmp_path):
    folder = tmp_path / "jobs" / "x" / "rj-abc123"
    folder.mkdir(parents=True)
    broken = tmp_path / "jobs" / "y" / "rj-def456"
    broken.mkdir(parents=True)
    (broken / "runjob.json").write_text("{not json")
    ctx = context(Lister([
        TaggedJob(tag="runjob:rj-abc123:1", backend_job_id="1", state="RUNNING", source="lister", job_dir=str(folder)),
        TaggedJob(tag="runjob:rj-def456:2", backend_job_id="2", state="RUNNING", source="lister", job_dir=str(broken)),
        TaggedJob(tag="runjob:rj-ghi789:1", backend_job_id="3", state="PENDING", source="lister"),
        TaggedJob(tag="runjob:not a tag", backend_job_id="4", state="RUNNING", source="lister"),
    ]))
    found, lines = adopt.untracked(ctx, [ctx.clusters["box"]])
    why = {f.job.backend_job_id: f.why_not for f in found}
    assert set(why) == {"1", "2", "3"}
    assert why["1"].startswith(f"no {folder}/runjob.json")
    assert why["2"].startswith(f"{broken}/runjob.json is not a job record runjob can read")
    assert why["3"] == "the backend does not know its folder, so its record cannot be rebuilt"
    assert all(f.record is None for f in found)
