"""Validated job and cluster files, cached by their bytes.

Parsing YAML and structuring it with cattrs costs ~60 ms of imports and work on every
command, most of a small submit's budget. A file whose bytes (and source path, and the
runjob code that validates it) were seen before is loaded from a pickle instead. Only
results that passed every check are stored, so an invalid file is parsed, and reported,
every time.

The cache lives in ``$XDG_CACHE_HOME/runjob/specs`` (``~/.cache`` by default). It is used
only when that folder belongs to the user and nobody else can write to it (a pickle is
code); ``RUNJOB_SPEC_CACHE=0`` turns it off. A damaged or stale entry is a miss.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Entries kept; the oldest are removed beyond this (each is a few KiB).
MAX_ENTRIES = 400


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "runjob" / "specs"


def _code_stamp() -> bytes:
    # The pickles hold instances of the record classes: a change to the records or to the
    # checks (an editable install changes without a version bump) must miss the cache.
    from runjob_core import __version__, config, models
    from runjob_core.config import options

    parts = [__version__, sys.version]
    for module in (config, models, options):
        info = os.stat(module.__file__)
        parts.append(f"{module.__file__}:{info.st_mtime_ns}:{info.st_size}")
    return "\0".join(parts).encode()


def is_private_dir(folder: Path) -> bool:
    """True when *folder* is a directory of this user that nobody else can write to (what
    a cache of pickles or bytecode needs: its files are run as code)."""
    try:
        info = folder.stat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022


def cached(kind: str, data: bytes, where: str, build: Callable[[], T]) -> T:
    """``build()``'s result for a file of *kind* read from *where* holding *data*."""
    if os.environ.get("RUNJOB_SPEC_CACHE", "1") == "0":
        return build()
    digest = hashlib.sha256(b"\0".join([kind.encode(), where.encode(), _code_stamp(), data])).hexdigest()
    folder = cache_dir()
    entry = folder / f"{kind}-{digest[:40]}.pickle"
    if is_private_dir(folder):
        hit = _load(entry)
        if hit is not None:
            return hit
    result = build()
    _store(folder, entry, result)
    return result


def _load(entry: Path) -> object | None:
    try:
        with entry.open("rb") as handle:
            return pickle.load(handle)  # noqa: S301 - our own private folder, checked by is_private_dir
    except FileNotFoundError:
        return None
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError) as exc:
        log.debug("spec cache entry %s is unusable (%s); rebuilding", entry, exc)
        return None


def _store(folder: Path, entry: Path, result: object) -> None:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not is_private_dir(folder):
            log.debug("spec cache %s is not private to this user; not caching", folder)
            return
        try:
            blob = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            # A plugin's options class defined where pickle cannot name it (inside a function):
            # that file is parsed every time, as without a cache.
            log.debug("spec cache: %s cannot be pickled (%s); not caching", entry.name, exc)
            return
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
        tmp.write_bytes(blob)
        tmp.replace(entry)
        entries = list(folder.glob("*.pickle"))
        if len(entries) > MAX_ENTRIES:
            entries.sort(key=lambda p: p.stat().st_mtime)
            for old in entries[: len(entries) - MAX_ENTRIES]:
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.debug("cannot write the spec cache %s: %s", folder, exc)
