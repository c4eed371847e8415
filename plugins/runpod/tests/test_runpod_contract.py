"""The backend contract, run against the fake RunPod API whose pods are real sshd servers."""

from __future__ import annotations

from typing import Any

import pytest

from runjob_core.testing import BackendContract


class TestRunpodContract(BackendContract):
    __test__ = True
    backend = "runpod"

    @pytest.fixture(autouse=True)
    def _fake(self, fake_runpod):
        self.fake = fake_runpod

    def job_spec(self, name: str, command: str, **fields: Any):
        # A RunPod cluster with max_usd_total needs a time limit to bound the cost.
        resources = {"time": "30m", **fields.pop("resources", {})}
        return super().job_spec(name, command, resources=resources, **fields)

    def lose(self, context: Any, submission: Any) -> None:
        self.fake.lose(submission.backend_job_id, "TERMINATED")  # the host went, and the pod with it
