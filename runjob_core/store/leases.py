"""Leases in the state store: one writer per job, however many runjob processes share it.

A lease is a row ``(key, owner, expires_at)`` in the ``leases`` table, taken and renewed in
one ``BEGIN IMMEDIATE`` transaction, so two processes asking at the same instant cannot
both get it. Keys used by the core:

``spec:<name>:<spec hash>:<kind>``
    creating a job for a spec (``runjob run``/``submit``): the second process finds the
    first one's job and follows it instead of creating its own.
``submit:<job id>``
    creating, submitting or reattaching an attempt (submit, auto-resume, retry, ``runjob
    resume``): the holder re-checks that the attempt it is about to create is still the
    next one, so one attempt is submitted once.
``observe:<job id>``
    polling a job and recording what the poll says (states, log offsets, findings,
    actions): held by one monitor while it follows the job; the others show the store.
``collect:<job id>``
    downloading a job's results into ``results/<name>/``.

The owner names the host, the process id and its start time: on the same host a lease is
held as long as its owner process lives and is free at once when it is gone (``kill -9``);
an owner on another host (a state folder on a shared filesystem) holds it until
``expires_at``.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from pathlib import Path

from runjob_core.store import locator as _locator

SCHEMA = """
CREATE TABLE IF NOT EXISTS leases(
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
)
"""

#: How long a lease lasts without renewal (a crashed process on another host frees it then).
DEFAULT_TTL = 300.0


def _start_time(pid: int) -> str:
    # Field 22 of /proc/PID/stat: the start time, which tells a reused pid from the owner.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[1].split()
    return "" if fields[0] == "Z" else fields[19]  # a zombie is gone, whatever /proc still says


def make_owner() -> str:
    pid = os.getpid()
    return f"{_locator.host()}:{pid}:{_start_time(pid)}:{secrets.token_hex(4)}"


def owner_state(owner: str) -> str:
    """"alive" or "gone" for an owner on this host; "unknown" for one on another host."""
    try:
        host, pid, started, _token = owner.rsplit(":", 3)
    except ValueError:
        return "unknown"
    if host != _locator.host() or not pid.isdigit():
        return "unknown"
    return "alive" if started and _start_time(int(pid)) == started else "gone"


def _held_by_other(owner: str, expires_at: float, now: float) -> bool:
    # On this host a live owner keeps its lease however long its work takes (a slow upload
    # must not let a second process in), and a gone one loses it at once; an owner on
    # another host (a shared state folder) keeps it until it expires.
    state = owner_state(owner)
    return state == "alive" or (state == "unknown" and expires_at > now)


def try_take(db: sqlite3.Connection, key: str, owner: str, ttl: float) -> str | None:
    """Take or renew *key* for *owner*; returns None on success, else the current holder."""
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT owner, expires_at FROM leases WHERE key = ?", (key,)).fetchone()
        if row is not None and row[0] != owner and _held_by_other(row[0], row[1], now):
            db.execute("COMMIT")
            return row[0]
        db.execute("INSERT INTO leases(key, owner, expires_at) VALUES (?,?,?)"
                   " ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at",
                   (key, owner, now + ttl))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite may have rolled back already (a full disk at COMMIT)
            db.execute("ROLLBACK")
        raise
    return None


def try_take_many(db: sqlite3.Connection, keys: list[str], owner: str, ttl: float) -> dict[str, str]:
    """:func:`try_take` for many keys in one transaction (the monitor leases every job it
    follows each cycle: one commit per job would cost more than the poll). Returns the keys
    another live owner holds, with that owner; every other key is now *owner*'s."""
    now = time.time()
    held: dict[str, str] = {}
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows.update((k, (o, e)) for k, o, e in db.execute(
                f"SELECT key, owner, expires_at FROM leases WHERE key IN ({marks})", chunk))
        take = []
        for key in keys:
            row = rows.get(key)
            if row is not None and row[0] != owner and _held_by_other(row[0], row[1], now):
                held[key] = row[0]
            else:
                take.append((key, owner, now + ttl))
        db.executemany("INSERT INTO leases(key, owner, expires_at) VALUES (?,?,?)"
                       " ON CONFLICT(key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at", take)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return held


def release_many(db: sqlite3.Connection, keys: list[str], owner: str) -> None:
    db.executemany("DELETE FROM leases WHERE key = ? AND owner = ?", [(key, owner) for key in keys])


def release(db: sqlite3.Connection, key: str, owner: str) -> None:
    db.execute("DELETE FROM leases WHERE key = ? AND owner = ?", (key, owner))


def release_all(db: sqlite3.Connection, owner: str) -> None:
    db.execute("DELETE FROM leases WHERE owner = ?", (owner,))


def holders(db: sqlite3.Connection, keys: list[str], owner: str) -> dict[str, str]:
    """The keys of *keys* held by a live owner other than *owner*, with that owner."""
    now = time.time()
    held: dict[str, str] = {}
    for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
        chunk = keys[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for key, other, expires_at in db.execute(f"SELECT key, owner, expires_at FROM leases WHERE key IN ({marks})", chunk):
            if other != owner and _held_by_other(other, expires_at, now):
                held[key] = other
    return held


def holder(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT owner, expires_at FROM leases WHERE key = ?", (key,)).fetchone()
    if row is None or not _held_by_other(row[0], row[1], time.time()):
        return None
    return row[0]


class Lease:
    """``with store.claim(key):`` waits for the lease, holds it for the block, frees it."""

    def __init__(self, store, key: str, *, ttl: float, wait: float | None) -> None:
        self.store, self.key, self.ttl, self.wait = store, key, ttl, wait
        self.held_before = False

    def __enter__(self) -> Lease:
        self.held_before = self.key in self.store._leases_held
        deadline = None if self.wait is None else time.monotonic() + self.wait
        delay = 0.05
        while (other := self.store.try_lease(self.key, ttl=self.ttl)) is not None:
            if deadline is not None and time.monotonic() >= deadline:
                from runjob_core.errors import RunjobError

                raise RunjobError(f"another runjob process ({other}) is working on {self.key} in {self.store.path}; "
                                  "wait for it to finish, or stop it")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        return self

    def __exit__(self, *exc) -> None:
        if not self.held_before:  # a lease held around this block (observe) stays held
            self.store.release_lease(self.key)
