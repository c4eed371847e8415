"""The scheduler's reason for a live job goes through the health rules (issue 35: scheduler
failures outside the job's own stderr). Reasons are squeue's %r words as the SLURM backend
reports them in JobStatus.reason."""

from __future__ import annotations

import pytest

from runjob_core.context import offline_context
from runjob_core.models import JobStatus
from runjob_core.config import job_from_mapping
from runjob_health import _monitor


class _Submission:
    tag = "runjob:rj-test:1"


@pytest.fixture
def check():
    context = offline_context()
    job = job_from_mapping({"name": "t", "command": "true"}, source="job.yaml")

    def run(state: str, reason: str | None):
        status = JobStatus(state=state, source="runjob-slurm", reason=reason)
        return _monitor.check(job, _Submission(), status, "", None, context)

    return run


@pytest.mark.parametrize("reason", ["launch failed requeued held", "NodeDown"])
def test_a_node_failure_reason_of_a_waiting_job_is_a_finding_once(check, reason):
    findings = check("PENDING", reason)
    assert [f.label for f in findings] == ["node_fail"]
    assert reason in findings[0].message
    assert findings[0].action == "warn"  # reported, not acted on: the job's end state decides
    assert check("PENDING", reason) == []  # the same reason on the next cycle: nothing new


@pytest.mark.parametrize("reason", ["Priority", "Resources", "QOSMaxJobsPerUserLimit", "BeginTime", "Dependency"])
def test_ordinary_queue_reasons_stay_quiet(check, reason):
    assert check("PENDING", reason) == []
