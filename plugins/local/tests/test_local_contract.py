"""The local backend passes the backend contract with real processes."""

import pytest

from runjob_core.models import ClusterConfig
from runjob_core.testing import BackendContract


class TestLocalContract(BackendContract):
    __test__ = True
    backend = "local"

    @pytest.fixture
    def cluster(self):
        return ClusterConfig(name="under-test", type="local")
