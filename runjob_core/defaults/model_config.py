"""A model's maximum context, from its ``config.json`` (and ``generation_config.json``).

Where the files come from, first found wins:

1. ``model.path`` on the job's cluster (read through the cluster's transport, so a path on a
   SLURM cluster's scratch is read over SSH, a local one from disk);
2. the Hugging Face cache of this machine (``HF_HUB_CACHE``; no network);
3. the Hub (or ``HF_ENDPOINT``) through ``huggingface_hub``, which stores what it downloads
   in that cache, so a second pre-flight reads the cache.

A model that cannot be read (offline, no ``huggingface_hub``, gated, not on the Hub) gives
:class:`Unknown` with the reason: pre-flight then warns, it never fails on it.

The length follows vLLM's own rule (``_get_and_verify_max_len``): the smallest of the
length keys the config has, times the rope-scaling factor for the scaling types that extend
the window (``yarn`` from ``original_max_position_embeddings``); ``llama3``, ``longrope``,
``su`` and ``default`` are already counted in ``max_position_embeddings``. A
``generation_config.json`` ``max_length`` is used where ``config.json`` has no length key.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import attrs

#: config.json keys that bound the context, as vLLM reads them.
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_sequence_length", "max_seq_length", "seq_len")
#: rope_scaling types whose factor is already part of max_position_embeddings.
_UNSCALED_ROPE = (None, "default", "su", "longrope", "llama3", "mrope")


@attrs.frozen
class ModelLength:
    tokens: int
    #: How it was derived, e.g. "max_position_embeddings 32768 x rope_scaling yarn factor 4.0".
    why: str
    #: Where config.json was read.
    where: str


@attrs.frozen
class Unknown:
    reason: str


def max_context(config: dict[str, Any], generation: dict[str, Any] | None = None) -> tuple[int, str] | None:
    """The model's maximum context and how it was derived, or None if the files say nothing."""
    text = config.get("text_config")
    cfg = text if isinstance(text, dict) else config
    found = {key: cfg[key] for key in LENGTH_KEYS if isinstance(cfg.get(key), int) and not isinstance(cfg[key], bool)
             and cfg[key] > 0}
    if not found:
        limit = (generation or {}).get("max_length")
        if isinstance(limit, int) and limit > 0:
            return limit, f"max_length {limit} in generation_config.json"
        return None
    key = min(found, key=found.__getitem__)
    tokens, why = found[key], f"{key} {found[key]}"
    rope = cfg.get("rope_scaling")
    if isinstance(rope, dict):
        kind = rope.get("rope_type") or rope.get("type")
        factor = rope.get("factor")
        if kind not in _UNSCALED_ROPE and "mrope_section" not in rope and isinstance(factor, (int, float)) and factor > 0:
            base = tokens
            original = rope.get("original_max_position_embeddings")
            if kind == "yarn" and isinstance(original, int) and original > 0:
                base, why = original, f"original_max_position_embeddings {original}"
            tokens = int(base * factor)
            why += f" x rope_scaling {kind} factor {factor:g}"
    return tokens, why


def _parse(text: str | None, where: str) -> dict[str, Any] | Unknown | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return Unknown(f"{where} is not valid JSON ({exc})")
    return data if isinstance(data, dict) else Unknown(f"{where} is not a JSON object")


def _from_folder(read, folder: str) -> ModelLength | Unknown | None:
    """*read(path) -> text or None*: config files in a model folder (model.path)."""
    config = _parse(read(f"{folder.rstrip('/')}/config.json"), f"{folder}/config.json")
    if not isinstance(config, dict):
        return config
    generation = _parse(read(f"{folder.rstrip('/')}/generation_config.json"), f"{folder}/generation_config.json")
    return _length(config, generation if isinstance(generation, dict) else None, f"{folder}/config.json")


def _length(config, generation, where: str) -> ModelLength | Unknown:
    found = max_context(config, generation)
    if found is None:
        return Unknown(f"{where} names no maximum length ({', '.join(LENGTH_KEYS[:3])}, ...)")
    return ModelLength(found[0], found[1], where)


def _from_hub(repo_id: str) -> ModelLength | Unknown:
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        return Unknown("huggingface_hub is not installed (pip install 'runjob-core[hub]') and model.path has no config.json")
    cached = huggingface_hub.try_to_load_from_cache(repo_id, "config.json")
    where = "the Hugging Face cache"
    endpoint = hub_endpoint()
    try:
        if not isinstance(cached, str):
            if huggingface_hub.constants.is_offline_mode():
                return Unknown(f"HF_HUB_OFFLINE is set and {repo_id}/config.json is not in the Hugging Face cache")
            if not _reachable(endpoint):
                # huggingface_hub retries a dead connection for ~25 s: ask once, briefly
                return Unknown(f"cannot reach the Hub ({endpoint}) for {repo_id}/config.json and it is not in the "
                               "Hugging Face cache")
            cached = huggingface_hub.hf_hub_download(repo_id, "config.json", endpoint=endpoint)
            where = f"the Hub ({endpoint})"
    except errors.OfflineModeIsEnabled:
        return Unknown(f"HF_HUB_OFFLINE is set and {repo_id}/config.json is not in the Hugging Face cache")
    except (errors.GatedRepoError, errors.RepositoryNotFoundError) as exc:
        return Unknown(f"the Hub does not give {repo_id}/config.json ({type(exc).__name__}: log in or check model.name)")
    except errors.LocalEntryNotFoundError:
        return Unknown(f"cannot reach the Hub for {repo_id}/config.json and it is not in the Hugging Face cache")
    except (errors.HfHubHTTPError, errors.HFValidationError, OSError) as exc:
        return Unknown(f"cannot read {repo_id}/config.json from the Hub: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    config = _parse(Path(cached).read_text(), f"{repo_id}/config.json")
    if not isinstance(config, dict):
        return config or Unknown(f"{repo_id}/config.json is empty")
    return _length(config, _hub_generation_config(repo_id, endpoint), f"{repo_id}/config.json in {where}")


def hub_endpoint() -> str:
    """HF_ENDPOINT as it is now (huggingface_hub reads it once, when imported)."""
    import huggingface_hub

    return (os.environ.get("HF_ENDPOINT") or huggingface_hub.constants.ENDPOINT).rstrip("/")


def _reachable(endpoint: str) -> bool:
    parts = urllib.parse.urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=3):
            return True
    except OSError:
        return False


def _hub_generation_config(repo_id: str, endpoint: str) -> dict[str, Any] | None:
    """generation_config.json, when the cache or the Hub has one (optional: None otherwise)."""
    import huggingface_hub
    from huggingface_hub import errors

    cached = huggingface_hub.try_to_load_from_cache(repo_id, "generation_config.json")
    if cached is not None and not isinstance(cached, str):
        return None  # the cache remembers that the repo has no such file
    try:
        path = cached if isinstance(cached, str) else huggingface_hub.hf_hub_download(
            repo_id, "generation_config.json", endpoint=endpoint)
    except (errors.HfHubHTTPError, errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled, OSError):
        return None  # optional file: config.json alone decides
    data = _parse(Path(path).read_text(), f"{repo_id}/generation_config.json")
    return data if isinstance(data, dict) else None


def model_length(job, read_on_cluster) -> ModelLength | Unknown:
    """The maximum context of the job's model. *read_on_cluster(path)* reads a file on the
    job's cluster (None when it does not exist)."""
    model = job.model
    if model.path:
        found = _from_folder(read_on_cluster, model.path)
        if found is not None and (isinstance(found, ModelLength) or not model.name):
            return found
    if model.name:
        return _from_hub(model.name)
    return Unknown(f"no config.json in model.path {model.path}")
