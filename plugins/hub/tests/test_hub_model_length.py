"""The model-length pre-flight reading config.json from the Hub with the real huggingface_hub
client, against the fake Hub (HF_ENDPOINT), then from the HF cache, and offline."""

from __future__ import annotations

from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi

from runjob_core import lifecycle
from runjob_core.config import job_from_mapping
from runjob_core.defaults.model_length import RULE

CONFIGS = Path(__file__).resolve().parents[3] / "tests" / "data" / "model_configs"


@pytest.fixture
def ctx(runjob_home):
    context = lifecycle.open_context()
    yield context
    context.close()


@pytest.fixture
def endpoint(hub, h, monkeypatch):
    """The fake Hub as HF_ENDPOINT, holding the real Qwen/Qwen2.5-7B config.json; the user is
    logged in with a read token (the fake Hub wants a token on every request)."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # read when the check runs, not when huggingface_hub was imported
    monkeypatch.setenv("HF_TOKEN", h.read_token)
    api = HfApi(endpoint=hub.url, token=h.token)
    api.create_repo("Qwen/Qwen2.5-7B", private=False)
    api.upload_file(path_or_fileobj=str(CONFIGS / "Qwen--Qwen2.5-7B" / "config.json"), path_in_repo="config.json",
                    repo_id="Qwen/Qwen2.5-7B")
    return hub.url


def preflight(ctx, **model):
    job = job_from_mapping({"name": "gen", "command": "python3 gen.py", "template": "vllm", "model": model},
                           source="gen.yaml")
    checks = lifecycle.preflight(ctx, job, ctx.clusters["local"])
    return checks, [e for e in checks.estimates if e.data.get("model") == model.get("name")]


def test_reads_the_hub_then_the_cache(ctx, endpoint):
    checks, (estimate,) = preflight(ctx, name="Qwen/Qwen2.5-7B", max_tokens=2048)
    assert checks.refused and RULE in checks.problems[0] and "below the 131072 tokens" in checks.problems[0]
    assert estimate.data["where"] == f"Qwen/Qwen2.5-7B/config.json in the Hub ({endpoint})"
    ctx.core_memory.model_lengths.clear()  # a new invocation: the file now comes from the HF cache
    _, (again,) = preflight(ctx, name="Qwen/Qwen2.5-7B")
    assert again.data["where"] == "Qwen/Qwen2.5-7B/config.json in the Hugging Face cache" and again.fits is None


def test_a_repo_the_hub_does_not_have_is_a_warning(ctx, endpoint):
    checks, (estimate,) = preflight(ctx, name="nobody/nothing", max_tokens=10)
    assert not checks.refused and estimate.fits is None
    assert "not checked" in estimate.summary and "nobody/nothing/config.json" in estimate.summary


def test_offline_is_a_warning(ctx, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    checks, (estimate,) = preflight(ctx, name="Qwen/Qwen2.5-7B", max_tokens=10)
    assert not checks.refused
    assert estimate.summary.startswith("warning: the model's maximum length was not checked: HF_HUB_OFFLINE is set")


def test_unreachable_hub_is_a_warning(ctx, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    checks, (estimate,) = preflight(ctx, name="Qwen/Qwen2.5-7B", max_tokens=10)
    assert not checks.refused
    assert "cannot reach the Hub (http://127.0.0.1:9) for Qwen/Qwen2.5-7B/config.json" in estimate.summary
