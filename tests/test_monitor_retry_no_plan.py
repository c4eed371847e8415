"""The retry path of the monitor when the backend's runjob_resume answers None (no plan):
an earlier version read ``plan.checkpoint`` of None and crashed the cycle."""

import yaml

from runjob_core import lifecycle
from runjob_core.monitor import JobView, Monitor, endings
from runjob_core.models import FAILED, Finding, JobStatus
from runjob_core.testing import run_cli as runjob


def test_retry_without_a_resume_plan_resubmits_from_the_start(runjob_home):
    (runjob_home / "flaky.yaml").write_text(yaml.safe_dump({"name": "flaky", "command": "exit 3"}))
    assert runjob("submit", "flaky.yaml", "--yes", cwd=runjob_home).returncode == 0
    context = lifecycle.open_context()
    try:
        row = context.store.find_job("flaky")
        attempt = context.store.attempt(row.id, 1)
        # The backend's runjob_resume finds nothing to resume from.
        context._callers[("runjob_resume", row.backend)] = lambda **kwargs: None
        view = JobView(job_id=row.id, name=row.name, attempt=1, state=FAILED)
        finding = Finding(label="nccl_timeout", severity="error", message="NCCL timeout", action="retry", source="test")
        endings.maybe_retry(Monitor.of(context), row, attempt, JobStatus(state=FAILED, source="test", exit_code=3), [finding], view)
        resuming = [e for e in context.store.events(row.id, kinds=("resuming",))]
        assert resuming and "its results so far" in resuming[-1].message
        assert view.state == "RESUBMITTED"
        assert len(context.store.attempts(row.id)) == 2
    finally:
        context.close()
