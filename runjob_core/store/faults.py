"""What a broken state store means to the user, in one line each.

SQLite reports a truncated or overwritten file, a read-only folder and a full disk as
``sqlite3`` exceptions; :class:`Connection` turns those (and only those) into
:class:`StoreError` lines that name the file, the cause and the fix. A corrupt file is
moved aside (never deleted) and the next command starts a fresh one holding what can still
be read from it (:mod:`runjob_core.store.salvage`). Any other sqlite3 error is a bug and keeps its traceback.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from runjob_core.errors import RunjobError


class StoreError(RunjobError):
    """The state store cannot be used; the message says why and what to do."""


class StoreCorruptError(StoreError):
    pass


class StoreUnwritableError(StoreError):
    pass


class StoreTransientError(StoreError):
    """A fault that passes by itself: ``watch`` waits (backing off) and runs its cycle again."""


class StoreFullError(StoreTransientError):
    """The disk holding the store is full: transient for ``watch``, which retries."""


class StoreUnreachableError(StoreTransientError):
    """The state's server cannot be reached now (PostgreSQL down, restarting, network cut)."""


_CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
_UNWRITABLE = {"SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH"}


def _kind(exc: sqlite3.Error) -> str | None:
    name = getattr(exc, "sqlite_errorname", "") or ""
    base = name.split("_")[:2]
    base = "_".join(base)
    text = str(exc).lower()
    if base in _CORRUPT or "malformed" in text or "not a database" in text:
        return "corrupt"
    if base == "SQLITE_FULL" or "disk is full" in text:
        return "full"
    if base in _UNWRITABLE or "readonly database" in text or "unable to open database" in text:
        return "unwritable"
    if base == "SQLITE_IOERR":
        # An I/O error while writing is most often a full or read-only filesystem.
        return "unwritable"
    return None


def keep_aside(path: Path) -> Path:
    """Rename a corrupt database (and its WAL and shared-memory files) out of the way."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.replace(Path(f"{aside}{suffix}"))
    return aside


def translate(exc: BaseException, path: Path) -> BaseException:
    """The :class:`StoreError` for *exc*, or *exc* itself when it is not a store fault."""
    if isinstance(exc, PermissionError):
        return StoreUnwritableError(f"cannot use the state store {path}: {exc.strerror} ({exc.filename}); make "
                                    f"{path.parent} writable, or set RUNJOB_HOME to a writable folder")
    if isinstance(exc, OSError) and exc.errno == 28:
        return StoreFullError(f"the disk holding the state store {path} is full; free space there, "
                              "or set RUNJOB_HOME to a folder on another disk")
    if not isinstance(exc, sqlite3.Error):
        return exc
    kind = _kind(exc)
    if kind == "full":
        return StoreFullError(f"the disk holding the state store {path} is full ({exc}); free space there and run the "
                              "command again (nothing recorded so far is lost)")
    if kind == "unwritable":
        return StoreUnwritableError(f"cannot write the state store {path} ({exc}); make {path.parent} and the files in it "
                                    "writable for you, or set RUNJOB_HOME to a writable folder")
    if kind == "corrupt":
        try:
            aside = keep_aside(path)
        except OSError as move_error:
            return StoreCorruptError(f"the state store {path} is damaged ({exc}) and could not be moved aside "
                                     f"({move_error.strerror}); move it away by hand, then: sqlite3 OLD .recover | sqlite3 {path}")
        return StoreCorruptError(f"the state store {path} is damaged ({exc}); it was kept aside as {aside} and the next "
                                 "command starts a new one with every job, attempt and event that can still be read from it")
    return exc


class Connection(sqlite3.Connection):
    """A connection whose store faults surface as one-line :class:`StoreError`s; it answers
    the dialect's questions the Store asks (the same methods as
    :class:`runjob_core.store.postgres.Connection`)."""

    store_path: Path = Path("state.db")
    dialect = "sqlite"

    def schema_version(self) -> int:
        return self.execute("PRAGMA user_version").fetchone()[0]

    def set_schema_version(self, version: int) -> None:
        self.execute(f"PRAGMA user_version = {int(version)}")

    def has_table(self, name: str) -> bool:
        return self.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None

    def columns(self, table: str) -> list[str]:
        return [row[1] for row in self.execute(f"PRAGMA table_info({table})")]

    def among(self, values: list) -> tuple[str, tuple]:
        """``IN (...)`` of *values* as one parameter (a JSON array read by ``json_each``), and
        that parameter: one statement for 10,000 job ids, where ``IN (?,?,...)`` needs one per 500
        (the host-parameter limit). The column's index is still used for each value."""
        import json

        return "IN (SELECT value FROM json_each(?))", (json.dumps(values),)

    def data_version(self) -> int:
        """Moves when another connection committed (PRAGMA data_version)."""
        return self.execute("PRAGMA data_version").fetchone()[0]

    def execute(self, *args, **kwargs):
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.Error as exc:
            translated = translate(exc, self.store_path)
            if translated is exc:
                raise
            raise translated from None
