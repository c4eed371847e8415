"""The state store: jobs, attempts, the activity log, log offsets and artifacts.

SQLite in WAL mode at ``.runjob/state.db`` of the working directory (``$RUNJOB_HOME``
overrides the folder), or a PostgreSQL database shared by a team (``RUNJOB_STATE_URL`` or
the ``state:`` key of a config file, :mod:`runjob_core.store.locator`): one schema, one set
of migrations and one set of methods serve both (:mod:`runjob_core.store.postgres`
translates the few words that differ). The store is runjob's memory: a monitor killed at any moment and
started again carries on from here, and an attempt recorded as ``SUBMITTING`` is
reattached by its tag instead of being submitted twice.

The package's parts: :mod:`~runjob_core.store.schema` (the tables, their migrations and the
SQLite file's setup), :mod:`~runjob_core.store.rows` (the frozen records the methods return),
and the Store's methods by group of tables: :mod:`~runjob_core.store.jobs` (jobs and sweeps),
:mod:`~runjob_core.store.attempts` (attempts and their pending follow-ups),
:mod:`~runjob_core.store.activity` (events and log offsets), :mod:`~runjob_core.store.outputs`
(artifacts and metrics). This module opens and closes the state, and holds what spans every
table: whether anything changed, leases, plugins' tables.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from runjob_core.store import faults as _store_faults
from runjob_core.store import leases as _leases
from runjob_core.store import locator as _locator
from runjob_core.store import schema as _schema
from runjob_core.store.activity import Activity
from runjob_core.store.attempts import Attempts, attempt_tag
from runjob_core.store.jobs import Jobs, _base36, new_job_id
from runjob_core.store.locator import state_dir
from runjob_core.store.outputs import MAX_METRIC_POINTS, Outputs
from runjob_core.store.rows import ArtifactRow, AttemptRow, EventRow, JobHead, JobRow, SweepRow
from runjob_core.store.schema import OLDEST_COMPATIBLE, SCHEMA_VERSION

#: What ``from runjob_core.store import ...`` has always offered (``_base36``: sweep ids are
#: made of the same digits as job ids, :mod:`runjob_core.sweep`).
__all__ = ["ArtifactRow", "AttemptRow", "EventRow", "JobHead", "JobRow", "MAX_METRIC_POINTS", "OLDEST_COMPATIBLE",
           "SCHEMA_VERSION", "Store", "SweepRow", "WAL_SETTLE_AT", "_base36", "attempt_tag", "new_job_id",
           "state_dir"]

#: SQLite's WAL past this size is emptied once a warm command has answered (Store.settle_wal).
WAL_SETTLE_AT = 1 << 20


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class Store(Jobs, Attempts, Activity, Outputs):
    """One SQLite database (cheap to open, safe to share between processes: WAL), or a
    PostgreSQL database shared between hosts when *path* is a ``postgresql://`` URL."""

    def __init__(self, path: Path | str) -> None:
        #: The state's file, or its URL without password for a PostgreSQL state (what messages name).
        self.path: Path | str = path
        #: Whether the state is a PostgreSQL database.
        self.shared = isinstance(path, str) and _locator.is_postgres(path)
        #: Who this store's leases belong to (host, pid, start time): see :mod:`runjob_core.store.leases`.
        self.owner = _leases.make_owner()
        self._leases_held: set[str] = set()
        self._plugin_schemas: set[str] = set()
        #: user@host written on the jobs, attempts and events this store records.
        self.who = _locator.who()
        if self.shared:
            self._open_postgres(path)
            return
        try:
            in_memory = str(path) == ":memory:"  # offline work (health scan, references): no file at all
            created = False if in_memory else _schema.make_private(path)
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None, factory=_store_faults.Connection)
            #: The file this store opened: another process may set it aside as damaged (see :meth:`generation`).
            self._file_id = None if in_memory else _file_id(path)
        except (OSError, sqlite3.Error) as exc:
            raise _store_faults.translate(exc, path) from None
        self._db.store_path = path
        self._db.row_factory = sqlite3.Row
        try:
            _schema.use_wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            _schema.upgrade(self._db, self.path)
            if created:
                from runjob_core.store import salvage as _store_salvage
                _store_salvage.salvage_into(self)  # a new store beside a damaged one: keep what it holds
        except BaseException:
            self._db.close()
            raise

    def _open_postgres(self, url: str) -> None:
        from runjob_core.store import postgres as _postgres

        self._db = _postgres.Connection(url)
        self.path = self._db.where
        self._file_id = None
        try:
            _schema.upgrade(self._db, self.path)
        except BaseException:
            self._db.close()
            raise

    @classmethod
    def open_default(cls) -> Store:
        url = _locator.state_url()
        if url is None:
            return cls(state_dir() / "state.db")
        if _locator.is_postgres(url):
            return cls(url)
        return cls(Path(_locator.sqlite_path(url)))

    def close(self) -> None:
        if self._leases_held:
            try:
                _leases.release_all(self._db, self.owner)
            except _store_faults.StoreError:
                pass  # a full or read-only store: the leases expire, and a dead owner frees them at once
        self._db.close()

    def settle_wal(self) -> None:
        """Past :data:`WAL_SETTLE_AT` bytes, checkpoint SQLite's WAL and empty it (TRUNCATE),
        waiting at most 50 ms for other connections, else leaving it as it is.

        Every process that opens the state reads the whole WAL back first (SQLite's recovery:
        ~1-2 ms at its usual 4 MB ceiling). A process of its own checkpoints and removes it when
        it closes the store at exit; a warm command's child (:mod:`runjob_core.warm.server`)
        never closes it, and calls this once its caller has the answer, so the next command
        reads back ~1 MB at most (the writer after an emptied WAL syncs its header once).
        Nothing for PostgreSQL."""
        if self.shared or self._file_id is None:
            return
        try:
            if os.path.getsize(f"{self.path}-wal") <= WAL_SETTLE_AT:
                return
        except OSError:
            return  # no WAL file: nothing to read back
        self._db.execute("PRAGMA busy_timeout = 50")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    # ------------------------------------------------------------------ whether anything changed (caches key on it)

    def generation(self) -> tuple[int, int]:
        """(commits by other connections, rows changed through this one): the same value
        twice means the database did not change in between (the monitor caches by it). On a
        PostgreSQL state the first part covers the jobs and attempts tables (what the caches read).

        Every monitoring cycle asks this, so it is also where a long-running command learns
        that another runjob set the store aside as damaged: its own connection would go on
        writing into the file that was moved away."""
        if self._file_id is not None and _file_id(self.path) != self._file_id:
            raise _store_faults.StoreCorruptError(
                f"the state store {self.path} was set aside (found damaged by another runjob command) while this one "
                "ran; run this command again: it continues on the new store with what could be recovered")
        return self._db.data_version(), self._db.total_changes

    def change_signature(self) -> Any:
        """Moves whenever anything the dashboard shows changed (by anyone): one statement (for a
        shared state, where file times cannot be watched)."""
        return tuple(self._db.execute(
            "SELECT (SELECT COUNT(*) FROM jobs), (SELECT MAX(id) FROM events), (SELECT COUNT(*) FROM attempts),"
            " (SELECT COUNT(*) FROM metrics), (SELECT MAX(id) FROM artifacts)").fetchone()) + (self.generation()[0],)

    def change_stamps(self) -> dict[str, list]:
        """Job id -> what changes when anything of the job changes: the fields of its attempts
        and the count and newest row id of its events, artifacts and metric points (the
        dashboard rebuilds a job only when this moved). Four queries for every job."""
        found: dict[str, list] = {}
        for table in ("events", "artifacts", "metrics"):
            for job_id, count, last in self._db.execute(f"SELECT job_id, COUNT(*), MAX(rowid) FROM {table} GROUP BY job_id"):
                found.setdefault(job_id, []).append([table, count, last])
        for row in self._db.execute("SELECT job_id, n, state, exit_code, started_at, ended_at, released_at, step, rows_done"
                                    " FROM attempts ORDER BY job_id, n"):
            found.setdefault(row[0], []).append(["attempt", *row[1:]])
        return found

    # ------------------------------------------------------------------ leases (one writer per job)

    def claim(self, key: str, *, ttl: float = _leases.DEFAULT_TTL, wait: float | None = None) -> _leases.Lease:
        """``with store.claim(key):``: wait (at most *wait* seconds; None: as long as it takes)
        until no other live process holds *key*, hold it for the block, then free it."""
        return _leases.Lease(self, key, ttl=ttl, wait=wait)

    def try_lease(self, key: str, *, ttl: float = _leases.DEFAULT_TTL) -> str | None:
        """Take or renew *key* without waiting: None when this store holds it now, else the
        owner that does (an expired lease, or one whose process is gone, is taken over)."""
        other = self._lease_module().try_take(self._db, key, self.owner, ttl)
        if other is None:
            self._leases_held.add(key)
        return other

    def _lease_module(self):
        """Taking leases: SQLite's one-writer transaction, or PostgreSQL's row locks (no store-wide lock)."""
        if self.shared:
            from runjob_core.store import postgres as _postgres
            return _postgres
        return _leases

    def held_leases(self, prefix: str = "") -> list[str]:
        """The leases this store took and still holds (``prefix``: only keys starting with it)."""
        return [key for key in self._leases_held if key.startswith(prefix)]

    def try_leases(self, keys: list[str], *, ttl: float = _leases.DEFAULT_TTL) -> dict[str, str]:
        """:meth:`try_lease` for many keys in one transaction: the keys held by someone else,
        with their owner; this store holds all the others."""
        if not keys:
            return {}
        others = self._lease_module().try_take_many(self._db, keys, self.owner, ttl)
        self._leases_held.update(k for k in keys if k not in others)
        return others

    def release_leases(self, keys: list[str]) -> None:
        with self.transaction():
            _leases.release_many(self._db, keys, self.owner)
        self._leases_held.difference_update(keys)

    def release_lease(self, key: str) -> None:
        _leases.release(self._db, key, self.owner)
        self._leases_held.discard(key)

    def lease_holder(self, key: str) -> str | None:
        return _leases.holder(self._db, key)

    def lease_holders(self, keys: list[str]) -> dict[str, str]:
        """Which of *keys* another live owner holds, with that owner; read only (no write)."""
        return self._lease_module().holders(self._db, keys, self.owner)

    # ------------------------------------------------------------------ plugins' own tables

    def plugin_connection(self, schema: str):
        """The database connection, for a plugin that keeps rows of its own in the state
        database (the local backend's GPU queue), so they share its transactions and survive
        with it. *schema* holds the plugin's ``CREATE TABLE IF NOT EXISTS`` statements (table
        names prefixed with the plugin's), run once per store. On a PostgreSQL state the
        connection takes the same SQL (``?`` parameters, SQLite's types). Write inside
        :meth:`transaction`: two runjob processes then never interleave."""
        if schema not in self._plugin_schemas:
            with self.transaction():  # executescript would commit the open transaction
                for statement in schema.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
            self._plugin_schemas.add(schema)
        return self._db
