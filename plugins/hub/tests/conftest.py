"""Fixtures for the Hub tests: a fake Hub on a loopback port and a sandboxed huggingface_hub."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# huggingface_hub reads these at import time: set them before anything imports it.
_SANDBOX = tempfile.mkdtemp(prefix="runjob-hub-tests-")
atexit.register(shutil.rmtree, _SANDBOX, ignore_errors=True)
os.environ.setdefault("HF_HOME", os.path.join(_SANDBOX, "hf_home"))
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"

huggingface_hub = pytest.importorskip("huggingface_hub")
import huggingface_hub.constants  # noqa: E402  (the package does not load it lazily)

from runjob_core.testing import fakehub  # noqa: E402

TOKEN = "hf_fakeWriteToken0123456789abcdef"
READ_TOKEN = "hf_fakeReadToken0123456789abcdef"


@pytest.fixture(autouse=True)
def hf_sandbox(tmp_path, monkeypatch):
    """HF_HOME in tmp, no telemetry, no token or endpoint from the environment, Xet off (LFS path)."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    for var in ("HF_TOKEN", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    c = huggingface_hub.constants
    monkeypatch.setattr(c, "HF_HOME", str(home))
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(c, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    monkeypatch.setattr(c, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(c, "HF_HUB_DISABLE_XET", True)
    return home


@pytest.fixture
def hub(tmp_path):
    srv = fakehub.serve(tmp_path / "fakehub", token=TOKEN, read_tokens=[READ_TOKEN])
    yield srv
    srv.stop()
    assert not srv.errors, "the fake Hub crashed:\n" + "\n".join(srv.errors)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def make_rows(n: int, **overrides) -> list[dict]:
    """Clean, realistic eval rows."""
    rows = []
    for i in range(n):
        row = {
            "id": f"q-{i:05d}",
            "prompt": f"Question {i}: what is {i} + {i}?",
            "response": f"Let me add {i} and {i}. The sum is {2 * i}.",
            "finish_reason": "stop",
            "num_output_tokens": 10 + i % 50,
            "score": float(i % 3 != 0),
        }
        row.update(overrides)
        rows.append(row)
    return rows


class _Helpers:
    token = TOKEN
    read_token = READ_TOKEN
    write_jsonl = staticmethod(write_jsonl)
    make_rows = staticmethod(make_rows)


@pytest.fixture
def h():
    """Helpers for the tests (conftest is not importable by name in importlib mode)."""
    return _Helpers
