"""The ``runjob`` entry points of the installed distributions, cached.

Scanning every installed distribution's metadata costs ~40 ms, on every command; the
answer changes only when something is installed or removed, which changes the mtime of a
``sys.path`` folder. So the scan is kept in ``$XDG_CACHE_HOME/runjob`` keyed by those
mtimes. ``runjob --help`` reads it to list plugin commands, so it is cheap to load: marshal
(built in, no json or hashlib import: ~7 ms of a 50 ms start-up) and a crc32 file name.

Groups: ``runjob`` (plugins; the name is the plugin's, a backend's ``type:``) and
``runjob.commands`` (CLI commands a plugin adds, ``name = "module:click_command"``).
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
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


def _cache_dir() -> str:
    # os.path, not pathlib: `runjob --help` reads this, and pathlib alone costs it ~10 ms.
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "runjob")


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _write_atomically(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}")
    with open(tmp, "wb") as file:
        file.write(data)
    os.replace(tmp, path)


def _help_key(ep: EntryPoint) -> str:
    return f"{ep.dist}=={ep.version}:{ep.name}={ep.value}"


def command_helps() -> dict[str, str]:
    """Plugin command -> its one-line help (or ``BROKEN: ...``), as last described by
    :func:`describe_commands`. ``runjob --help`` reads only this: it imports no plugin."""
    try:
        known = marshal.loads(_read(os.path.join(_cache_dir(), "command-help.marshal")))
    except (OSError, ValueError, EOFError, TypeError):
        return {}  # not described yet: the listing says how to describe them
    if not isinstance(known, dict):
        return {}
    return {ep.name: known[_help_key(ep)] for ep in entry_points("runjob.commands") if _help_key(ep) in known}


def describe_commands() -> dict[str, str]:
    """Load every plugin command once to read its one-line help (``runjob plugins`` and the
    warm process do; they import the plugins anyway) and keep it for ``runjob --help``."""
    described = {}
    for ep in entry_points("runjob.commands"):
        try:
            described[_help_key(ep)] = ep.load().get_short_help_str(limit=80) or "(no help)"
        except Exception as exc:  # a broken plugin: listed as broken, never hiding the other commands
            described[_help_key(ep)] = f"BROKEN: cannot be loaded ({type(exc).__name__}: {exc}); reinstall {ep.dist}"
    try:
        _write_atomically(os.path.join(_cache_dir(), "command-help.marshal"), marshal.dumps(described))
    except OSError:
        pass  # a read-only home: described again next time
    return {key.split(":", 1)[1].split("=", 1)[0]: text for key, text in described.items()}


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
    joined = "\0".join(entry for entry, _ in key).encode("utf-8", "surrogateescape")
    digest = f"{zlib.crc32(joined):08x}{zlib.adler32(joined):08x}"
    cache = os.path.join(_cache_dir(), f"entry-points-{digest}.marshal")
    try:
        cached = marshal.loads(_read(cache))
        # marshal's format is the interpreter's: the version is part of what must match.
        if cached["key"] == key and cached.get("groups") == list(GROUPS) and cached.get("python") == sys.version:
            return [EntryPoint(*item) for item in cached["entry_points"]]
    except (OSError, ValueError, EOFError, KeyError, TypeError):
        pass  # no usable cache (first run, or a newer format): scan and write it
    import importlib.metadata

    found = [
        EntryPoint(ep.name, ep.value, ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None, group)
        for group in GROUPS
        for ep in importlib.metadata.entry_points(group=group)
    ]
    try:
        data = {"key": key, "groups": list(GROUPS), "python": sys.version, "entry_points": [list(ep) for ep in found]}
        _write_atomically(cache, marshal.dumps(data))
    except OSError:
        pass  # a read-only home: scan again next time
    return found
