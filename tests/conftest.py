"""Fixtures of the core's tests (the kit's come from the root conftest)."""

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
