"""Fixtures of the core's tests (the kit's come from the root conftest)."""

import os
import sys
from pathlib import Path

import pytest

FAKE_DIST = Path(__file__).parent / "data" / "fake-dist"


@pytest.fixture
def with_fake_dist(monkeypatch):
    """A fake distribution with good, broken, duplicate, misspelled and checker plugins on sys.path."""
    monkeypatch.syspath_prepend(str(FAKE_DIST))
    yield
    for name in [m for m in sys.modules if m.startswith("fake_runjob_plugins")]:
        del sys.modules[name]


@pytest.fixture
def h100_machine(tmp_path, monkeypatch):
    """This machine as a workstation with 8 H100s (the stand-in nvidia-smi first on PATH): the
    local backend refuses GPU jobs on a machine without GPUs (issue 33), and the pre-flight
    tests estimate GPU jobs on `cluster: local`."""
    from runjob_core.testing import nvidia_smi

    folder = tmp_path / "standin-bin"
    nvidia_smi.install(folder, [nvidia_smi.gpu(i, name="NVIDIA H100 80GB HBM3", memory_total=81559) for i in range(8)])
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder
