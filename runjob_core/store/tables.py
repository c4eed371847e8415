"""What the Store's table-by-table parts stand on: its connection, who writes, and transactions.

:class:`~runjob_core.store.Store` is put together from one part per group of tables
(:mod:`~runjob_core.store.jobs`, :mod:`~runjob_core.store.attempts`,
:mod:`~runjob_core.store.activity`, :mod:`~runjob_core.store.outputs`), so that each can be
read on its own; :class:`Tables` names what they share, which the Store sets when it opens.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


class Tables:
    """The base of the Store's parts (never used alone: the Store opens the connection)."""

    #: SQLite's connection (:class:`runjob_core.store.faults.Connection`), or
    #: :class:`runjob_core.store.postgres.Connection`, which takes the same SQL.
    _db: Any
    path: Path | str
    who: str | None

    def transaction(self) -> Transaction:
        """``with store.transaction():`` the writes in the block land together or not at all
        (a full disk mid-way loses nothing: the block is done again). Re-entrant."""
        return Transaction(self._db)


class Transaction:
    """The outermost ``with`` opens the transaction (``BEGIN IMMEDIATE``: the write lock at once,
    so what the block reads stays true until it writes) and ends it; blocks inside it join it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._outer = False

    def __enter__(self) -> None:
        self._outer = not self._db.in_transaction
        if self._outer:
            self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._outer:
            return
        if exc_type is None:
            self._db.execute("COMMIT")
        elif self._db.in_transaction:
            self._db.execute("ROLLBACK")
