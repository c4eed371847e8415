"""Find a model's ``config.json``: a local path, the local Hugging Face cache, or the table.

Order: (1) an existing file or folder (a folder must hold ``config.json``); (2) the local
Hugging Face hub cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``; layout ``models--org--name/snapshots/<sha>/config.json``);
(3) the built-in table. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from runjob_core.errors import RunjobError
from runjob_core.estimator.catalog import ModelSpec, close_model_names, find_model


@attrs.frozen
class ResolvedModel:
    name: str
    config: dict[str, Any] = attrs.field(eq=False)
    origin: str  # "path" | "hf-cache" | "table"
    source: str  # file path or config URL
    spec: ModelSpec | None = None


def hf_hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunjobError(f"cannot read model config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise RunjobError(f"model config {path} is not a JSON object")
    return data


def _snapshot_config(repo_dir: Path) -> Path | None:
    snaps = repo_dir / "snapshots"
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        sha = ref.read_text(encoding="utf-8").strip()
        cand = snaps / sha / "config.json"
        if cand.is_file():
            return cand
    if not snaps.is_dir():
        return None
    found = [p / "config.json" for p in snaps.iterdir() if (p / "config.json").is_file()]
    if not found:
        return None
    return max(found, key=lambda p: p.stat().st_mtime)


def _from_hf_cache(name: str) -> tuple[Path, str] | None:
    cache = hf_hub_cache()
    if not cache.is_dir():
        return None
    want = name.strip().lower()
    dirs = [d for d in cache.iterdir() if d.is_dir() and d.name.startswith("models--")]
    exact, by_short = [], []
    for d in dirs:
        repo = d.name[len("models--"):].replace("--", "/")
        if repo.lower() == want:
            exact.append((d, repo))
        elif "/" not in want and repo.rsplit("/", 1)[-1].lower() == want:
            by_short.append((d, repo))
    for d, repo in exact + sorted(by_short, key=lambda t: t[1]):
        cfg = _snapshot_config(d)
        if cfg is not None:
            return cfg, repo
    return None


def resolve_model(name: str) -> ResolvedModel:
    """Resolve ``name`` (path, cached repo id, or table name) to a config dictionary."""
    if not name or not name.strip():
        raise RunjobError("no model given")
    p = Path(name).expanduser()
    if p.exists():
        cfg_path = p / "config.json" if p.is_dir() else p
        if not cfg_path.is_file():
            raise RunjobError(f"{p} is a folder without a config.json")
        cfg = _read_config(cfg_path)
        label = p.name if p.is_dir() else p.parent.name or p.stem
        return ResolvedModel(label, cfg, "path", str(cfg_path), find_model(label))
    hit = _from_hf_cache(name)
    if hit is not None:
        cfg_path, repo = hit
        return ResolvedModel(repo, _read_config(cfg_path), "hf-cache", str(cfg_path), find_model(repo))
    spec = find_model(name)
    if spec is not None:
        return ResolvedModel(spec.name, dict(spec.config), "table", spec.source, spec)
    close = close_model_names(name)
    hint = f"; close table names: {', '.join(close)}" if close else ""
    raise RunjobError(
        f"unknown model {name!r}: not a local path, not in the Hugging Face cache "
        f"({hf_hub_cache()}), not in the built-in table{hint}"
    )
