"""What a damaged state store still holds, carried into the store that replaces it.

A damaged ``state.db`` is moved aside (:func:`runjob_core.store.faults.keep_aside`) and the
next command starts a new one. Jobs still running on a cluster must not be forgotten with
it: when a new store is created beside a file set aside, every row that can still be read
from that file (table by table, skipping damaged stretches) is copied into the new store,
once, and the activity log says what came back. The damaged file is kept as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: The tables worth carrying over, parents first.
TABLES = ("sweeps", "jobs", "attempts", "events", "log_offsets", "artifacts", "metrics", "pending_actions")
#: Damaged stretches skipped per table before giving up on the rest of it.
MAX_SKIPS = 64


def latest_aside(path: Path) -> Path | None:
    """The newest damaged copy of *path* set aside beside it, or None."""
    asides = [p for p in path.parent.glob(f"{path.name}.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    return max(asides, key=lambda p: p.stat().st_mtime_ns) if asides else None


def _open(old: Path) -> sqlite3.Connection | None:
    for uri in (f"file:{old}?mode=ro", f"file:{old}?mode=ro&immutable=1"):
        try:
            source = sqlite3.connect(uri, uri=True)
            source.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return source
        except sqlite3.DatabaseError:
            continue
    return None  # not even its schema is readable (a destroyed header)


def _copy_table(source: sqlite3.Connection, db, table: str) -> int:
    """Copy the readable rows of *table*; duplicates of rows already there are ignored."""
    try:
        old_columns = [row[1] for row in source.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return 0
    new_columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    columns = [c for c in old_columns if c in new_columns]
    if not columns:
        return 0
    names = ", ".join(columns)
    insert = f"INSERT OR IGNORE INTO {table}({names}) VALUES ({', '.join('?' * len(columns))})"
    copied, last, skips, step = 0, 0, 0, 1  # the rowids of these tables start at 1
    while skips <= MAX_SKIPS:
        try:
            for row in source.execute(f"SELECT rowid, {names} FROM {table} WHERE rowid > ? ORDER BY rowid", (last,)):
                db.execute(insert, row[1:])
                copied += 1
                last, step = row[0], 1
            break
        except sqlite3.DatabaseError:
            # A damaged page: step over it (further each time in a row), keep what follows.
            skips += 1
            last, step = last + step, step * 4
    return copied


def salvage_into(store) -> dict[str, int] | None:
    """Copy what the newest damaged file beside *store* still holds into it (a new store),
    once; returns the rows copied per table, or None when there was nothing to do."""
    old = latest_aside(store.path)
    if old is None:
        return None
    db = store._db
    db.execute("BEGIN IMMEDIATE")  # one process salvages; another opening the new store waits, then skips
    try:
        done = db.execute("SELECT value FROM meta WHERE key = 'salvaged_from'").fetchone()
        if done is not None:
            db.execute("COMMIT")
            return None
        source = _open(old)
        counts = {}
        if source is not None:
            try:
                counts = {table: _copy_table(source, db, table) for table in TABLES}
            finally:
                source.close()
        db.execute("INSERT INTO meta(key, value) VALUES ('salvaged_from', ?)", (old.name,))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    kept = ", ".join(f"{n} {table}" for table, n in counts.items() if n) or "nothing readable"
    store.add_event(None, "store_recovered", f"the state store was damaged and set aside as {old.name}; carried over "
                    f"what could be read: {kept}", data={"aside": str(old), "rows": counts})
    return counts
