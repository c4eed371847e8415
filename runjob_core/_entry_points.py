"""The ``runjob`` entry points of the installed distributions, cached.

Scanning every installed distribution's metadata costs ~40 ms, on every command; the
answer changes only when something is installed or removed, which changes the mtime of a
``sys.path`` folder. So the scan is kept in ``$XDG_CACHE_HOME/runjob`` keyed by those
mtimes. Standard library only: ``runjob --help`` reads it to list plugin commands.

Groups: ``runjob`` (plugins; the name is the plugin's, a backend's ``type:``) and
``runjob.commands`` (CLI commands a plugin adds, ``name = "module:click_command"``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

GROUPS = ("runjob", "runjob.commands")


class EntryPoint(NamedTuple):
    # A NamedTuple, not a dataclass or attrs: `runjob --help` reads these, and every import counts.
    name: str
    value: str
    dist: str | None
    version: str | None
    group: str = "runjob"

    def load(self) -> Any:
        import importlib

        module_name, _, attribute = self.value.partition(":")
        module = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            module = getattr(module, part)
        return module


def _cache_key() -> list[list[Any]]:
    # Installing or removing a distribution changes its site-packages folder's mtime.
    key = []
    for entry in sys.path:
        try:
            key.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            key.append([entry, None])
    return key


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of *group* (one of :data:`GROUPS`), cached per sys.path state."""
    return [ep for ep in _all() if ep.group == group]


def _all() -> list[EntryPoint]:
    key = _cache_key()
    # One file per sys.path: `python -m pytest`, the console script and `python -c` see
    # different paths and would otherwise evict each other's entry on every switch.
    digest = hashlib.sha256(json.dumps([entry for entry, _ in key]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "runjob" / f"entry-points-{digest}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached["key"] == key and cached.get("groups") == list(GROUPS):
            return [EntryPoint(*item) for item in cached["entry_points"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no usable cache (first run, or a newer format): scan and write it
    import importlib.metadata

    found = [
        EntryPoint(ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None, group)
        for group in GROUPS
        for ep in importlib.metadata.entry_points(group=group)
    ]
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "groups": list(GROUPS), "entry_points": [list(ep) for ep in found]}))
        tmp.replace(cache)
    except OSError:
        pass  # a read-only home: scan again next time
    return found
