"""The local backend passes the backend contract with real processes."""

import os
import signal

import pytest

from runjob_core.models import ClusterConfig
from runjob_core.testing import BackendContract


class TestLocalContract(BackendContract):
    __test__ = True
    backend = "local"
    time_limit = "3s"
    time_limit_grace = 40.0  # timeout(1) sends KILL 30 s after TERM

    @pytest.fixture
    def cluster(self):
        return ClusterConfig(name="under-test", type="local")

    def lose(self, context, submission):
        # The machine "reboots": the runner and the job die at once, no exit code is written.
        os.killpg(int(submission.extra["pid"]), signal.SIGKILL)
