"""The backend contract, run against the fake RunPod API whose pods are real sshd servers."""

from __future__ import annotations

from runjob_core.testing import BackendContract


class TestRunpodContract(BackendContract):
    __test__ = True
    backend = "runpod"
