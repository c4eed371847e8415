"""PostgreSQL under the Store, for a state shared by a team (issue 27).

:class:`Connection` gives :class:`runjob_core.store.Store` the part of ``sqlite3.Connection``
it uses (``execute``, ``executemany``, ``in_transaction``, ``total_changes``, rows read by
index or by column name), so the Store's methods, its one schema and its migrations run
unchanged on both databases. What differs between the two dialects is translated here, once
per statement text (cached):

* ``?`` parameters become ``%s`` (and a literal ``%`` becomes ``%%``);
* ``rowid`` becomes ``ctid`` (PostgreSQL's row address: an order among equal timestamps, and
  what the metrics thinning deletes by);
* DDL types: ``INTEGER PRIMARY KEY AUTOINCREMENT`` -> ``BIGSERIAL PRIMARY KEY``, ``INTEGER``
  -> ``BIGINT``, ``REAL`` -> ``DOUBLE PRECISION``;
* ``BEGIN IMMEDIATE`` (SQLite's one writer at a time) becomes ``BEGIN`` plus a transaction-scoped
  advisory lock of this state's schema: write transactions queue exactly as they do on SQLite,
  across hosts, while reads never wait (MVCC). Leases take no such lock: they lock their own
  rows (:func:`try_take_many`), so a monitor renewing 2,000 leases does not stop other writers.

The password never passes through runjob: a URL that has one is handed to libpq as is and shown
without it (:func:`runjob_core.store.locator.display_url`); libpq reads ``PGPASSWORD`` or the
passfile (``PGPASSFILE``, ``~/.pgpass``) itself.

A lost connection (server restarted, network cut) raises :class:`StoreUnreachableError`, which
``runjob watch`` treats as a pause: the transaction in flight was rolled back whole by the
server, and the next statement connects again.
"""
from __future__ import annotations

import functools
import os
import re
import time
from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.store.faults import StoreError, StoreFullError, StoreUnreachableError, StoreUnwritableError
from runjob_core.store.locator import display_url

_INSTALL = "pip install 'runjob-core[postgres]' (psycopg 3)"


def _psycopg(url: str):
    try:
        import psycopg
    except ImportError:
        raise RunjobError(f"the state {display_url(url)} is a PostgreSQL database, and its driver is not "
                          f"installed: {_INSTALL}, or unset RUNJOB_STATE_URL for the local SQLite state") from None
    return psycopg


# ------------------------------------------------------------------ statement translation

_TYPES = ((re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.I), "BIGSERIAL PRIMARY KEY"),
          (re.compile(r"\bINTEGER\b", re.I), "BIGINT"),
          (re.compile(r"\bREAL\b", re.I), "DOUBLE PRECISION"))
_DDL = re.compile(r"^\s*(CREATE|ALTER)\s", re.I)
_ROWID = re.compile(r"\browid\b", re.I)


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, bool]:
    """(the PostgreSQL text of a Store statement, whether it writes)."""
    text = sql.replace("%", "%%").replace("?", "%s")
    if _DDL.match(text):
        for pattern, replacement in _TYPES:
            text = pattern.sub(replacement, text)
    text = _ROWID.sub("ctid", text)
    head = text.lstrip()[:7].upper()
    return text, head.startswith(("INSERT", "UPDATE", "DELETE"))


@functools.lru_cache(maxsize=256)
def _row_class(names: tuple[str, ...]) -> type:
    index = {name: i for i, name in enumerate(names)}
    get = tuple.__getitem__

    class Row(tuple):
        """A row read by position or by column name, as ``sqlite3.Row``."""
        __slots__ = ()

        def keys(self) -> list[str]:
            return list(names)

        def __getitem__(self, key):
            return get(self, index[key]) if isinstance(key, str) else get(self, key)

    return Row


def plain_rows(cursor) -> None:
    """Have *cursor* give plain tuples (see :func:`runjob_core.store.rows.to_records`)."""
    from psycopg.rows import tuple_row

    cursor.row_factory = tuple_row


def _row_factory(cursor):
    if cursor.description is None:
        return tuple
    return _row_class(tuple(column.name for column in cursor.description))


# ------------------------------------------------------------------ the connection


class Connection:
    """One PostgreSQL connection (autocommit; transactions are opened by ``BEGIN IMMEDIATE``)."""

    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = display_url(url)
        self._psycopg = _psycopg(url)
        self._conn = None
        self._lock_key = 0
        self.total_changes = 0
        #: Whether the state has the change counter of :func:`add_change_counter` (asked once).
        self._counted: bool | None = None
        self._connect()

    # -------------------------------------------------------------- connecting, faults

    def _connect(self) -> None:
        psycopg = self._psycopg
        from runjob_core.store.locator import who

        # pg_stat_activity then says whose runjob holds each connection (and tests find their own).
        name = f"runjob {who()} pid {os.getpid()}"[:63]
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, application_name=name)
        except psycopg.OperationalError as exc:
            raise connect_problem(self.where, str(exc)) from None
        except psycopg.ProgrammingError as exc:  # a malformed URL or option
            raise RunjobError(f"RUNJOB_STATE_URL={self.where} is not a usable PostgreSQL URL "
                              f"({_first_line(str(exc))}): write postgresql://USER@HOST:PORT/DB") from None
        conn.row_factory = _row_factory
        # One write lock per state (a schema of its own is a state of its own).
        self._lock_key = conn.execute("SELECT hashtext('runjob:' || current_schema())").fetchone()[0]
        self._conn = conn

    @property
    def raw(self):
        """The psycopg connection, connected again if the last one was lost."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = None
            self._connect()
        return self._conn

    def _fault(self, exc: Exception) -> Exception:
        """The one-line :class:`StoreError` for a psycopg error, or *exc* itself (a bug)."""
        errors = self._psycopg.errors
        if isinstance(exc, errors.ReadOnlySqlTransaction):
            return StoreUnwritableError(f"PostgreSQL at {self.where} is read-only (a replica, or "
                                        "default_transaction_read_only): point RUNJOB_STATE_URL at the primary server")
        if isinstance(exc, (errors.DiskFull, errors.OutOfMemory)):
            return StoreFullError(f"PostgreSQL at {self.where} is out of disk space ({_first_line(str(exc))}): "
                                  "free space on the server; nothing recorded so far is lost")
        if isinstance(exc, errors.InsufficientPrivilege):
            return StoreUnwritableError(f"PostgreSQL at {self.where} refused this role ({_first_line(str(exc))}): "
                                        "grant it the state's tables, or fix the user in RUNJOB_STATE_URL")
        if isinstance(exc, self._psycopg.OperationalError) and (self._conn is None or self._conn.broken
                                                                 or self._conn.closed):
            return StoreUnreachableError(f"lost the connection to PostgreSQL at {self.where} "
                                         f"({_first_line(str(exc))}): check the server is up; runjob connects again "
                                         "by itself and nothing was half written")
        if isinstance(exc, errors.AdminShutdown) or isinstance(exc, errors.CannotConnectNow):
            return StoreUnreachableError(f"PostgreSQL at {self.where} is shutting down or starting "
                                         f"({_first_line(str(exc))}): wait for it; runjob connects again by itself")
        return exc

    def _run(self, method: str, text: str, params) -> Any:
        conn = self.raw  # a lost connection is made again here (a failure is one line: connect_problem)
        try:
            if method == "executemany":
                cursor = conn.cursor()
                cursor.executemany(text, params)
                return cursor
            return conn.execute(text, params)
        except self._psycopg.Error as exc:
            fault = self._fault(exc)
            if fault is exc:
                raise
            raise fault from None

    # -------------------------------------------------------------- what the Store uses of sqlite3.Connection

    def execute(self, sql: str, params=()) -> Any:
        head = sql.lstrip()[:16].upper()
        if head.startswith("BEGIN"):
            self._run("execute", "BEGIN", ())
            try:
                self._run("execute", "SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            except BaseException:
                self.rollback_quietly()
                raise
            return None
        text, writes = translate(sql)
        cursor = self._run("execute", text, tuple(params) if params else None)
        if writes and cursor.rowcount > 0:
            self.total_changes += cursor.rowcount
        return cursor

    def executemany(self, sql: str, seq) -> Any:
        text, writes = translate(sql)
        rows = [tuple(row) for row in seq]
        if not rows:
            return None
        cursor = self._run("executemany", text, rows)
        if writes:
            self.total_changes += len(rows)
        return cursor

    @property
    def in_transaction(self) -> bool:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return False  # a lost connection's transaction was rolled back by the server
        return conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE

    def rollback_quietly(self) -> None:
        if self.in_transaction and not self._conn.broken:
            try:
                self._conn.execute("ROLLBACK")
            except self._psycopg.Error:
                pass  # the connection is gone: the server rolled the transaction back itself

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    # -------------------------------------------------------------- the dialect's own questions (see sqlite's in faults)

    def schema_version(self) -> int:
        if not self.has_table("meta"):
            return 0
        row = self.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    def set_schema_version(self, version: int) -> None:
        self.execute("INSERT INTO meta(key, value) VALUES ('schema_version', ?)"
                     " ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(version),))

    def has_table(self, name: str) -> bool:
        # pg_class read by a query sees what the statement's snapshot sees (to_regclass would use the
        # catalog cache, which can miss the tables another runjob created while this one waited for the lock).
        return self.execute("SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
                            " WHERE s.nspname = current_schema() AND c.relname = ?)", (name,)).fetchone()[0]

    def columns(self, table: str) -> list[str]:
        return [row[0] for row in self.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ? ORDER BY ordinal_position", (table,))]

    def among(self, values: list) -> tuple[str, tuple]:
        """``IN (...)`` of *values* as parameters (see the SQLite one's in
        :mod:`runjob_core.store.faults`): texts as one joined string split by the server (psycopg
        adapts a list of 10,000 strings as an array in ~15 ms, and parses a statement of 500
        placeholders in ~2 ms, uncached), anything else (a number, an empty text, a line break) as one array."""
        if all(isinstance(value, str) and value and "\n" not in value for value in values):
            return "IN (SELECT unnest(string_to_array(?, ?)))", ("\n".join(values), "\n")
        return "= ANY(?)", (list(values),)

    def data_version(self) -> Any:
        """Moves whenever a job or an attempt of this state was inserted, changed or deleted (by
        anyone): the counter those changes move in their own transaction (schema 7,
        :func:`add_change_counter`), one row read by its key (~0.2 ms, one round trip). A state
        whose counter is missing (a newer runjob's, compatible, that dropped it) falls back to the
        count of rows and the newest row version (``xmin``) of the two tables: exact too, but a
        scan of both (~1.5 ms at 2,000 jobs). The server's WAL position would move with every write
        of every database on it, and the caches would never hold."""
        if self._counted is None:
            self._counted = self.has_table("runjob_changes")
        if self._counted:
            return self.execute("SELECT n FROM runjob_changes WHERE id = 1").fetchone()[0]
        return self.execute(
            "SELECT (SELECT count(*) || ':' || coalesce(max(xmin::text::bigint), 0) FROM attempts) || '/' ||"
            " (SELECT count(*) || ':' || coalesce(max(xmin::text::bigint), 0) FROM jobs)").fetchone()[0]


def add_change_counter(db: Connection) -> None:
    """The change counter of jobs and attempts (schema 7): a one-row table, and a trigger on each
    table that adds one to it *before* each statement that inserts, updates or deletes there, in
    that statement's transaction. So the counter moves exactly when such a change commits
    (MVCC: a reader sees both or neither), and every writer of those tables takes the counter's
    row lock first, then its rows: writers of jobs and attempts queue one after the other (as on
    SQLite, where a write locks the whole database) and never deadlock on each other's rows. The
    function names its table with the schema (a session of another search_path may write)."""
    schema = db.execute("SELECT current_schema()").fetchone()[0]
    quoted = '"' + schema.replace('"', '""') + '"'
    db.execute("CREATE TABLE IF NOT EXISTS runjob_changes(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    db.execute("INSERT INTO runjob_changes(id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING")
    db.execute(f"CREATE OR REPLACE FUNCTION runjob_changed() RETURNS trigger LANGUAGE plpgsql AS $body$"
               f" BEGIN UPDATE {quoted}.runjob_changes SET n = n + 1 WHERE id = 1; RETURN NULL; END $body$")
    for table in ("jobs", "attempts"):
        db.execute(f"DROP TRIGGER IF EXISTS runjob_{table}_changed ON {table}")
        db.execute(f"CREATE TRIGGER runjob_{table}_changed BEFORE INSERT OR UPDATE OR DELETE ON {table}"
                   " FOR EACH STATEMENT EXECUTE FUNCTION runjob_changed()")


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["no detail"])[0]


def connect_problem(where: str, detail: str) -> StoreError:
    """One line for a connection that could not be made: the server (no password) and the fix."""
    low = detail.lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return StoreError(f"PostgreSQL at {where} refused the password: set PGPASSWORD, or add a line "
                          "HOST:PORT:DB:USER:PASSWORD to ~/.pgpass (chmod 600); runjob never stores it")
    if "does not exist" in low:
        return StoreError(f"PostgreSQL at {where}: {_first_line(detail)}; create it, or fix RUNJOB_STATE_URL")
    return StoreUnreachableError(f"PostgreSQL at {where} cannot be reached ({_first_line(detail)}): check the server "
                                 "is up and the host and port in RUNJOB_STATE_URL, or unset it for the local SQLite state")


# ------------------------------------------------------------------ leases
# The same leases as SQLite's (runjob_core.store.leases: one row per key, owner host:pid:start:token),
# taken in one transaction of three statements whatever the number of keys. New keys are inserted
# first: the primary key makes a second taker of the same new key wait for the first one's commit,
# then find the row. Existing rows are locked (FOR UPDATE, in key order, so two takers never
# deadlock) before the holder is judged, so two hosts never both see a key free.


def _key_list(keys: list[str]) -> tuple[str, str]:
    """*keys* as one text and its separator, for ``string_to_array``: adapting a list of 2,000
    strings as a PostgreSQL array costs psycopg ~3 ms, one joined string nothing."""
    separator = "\n"
    if any(separator in key for key in keys):
        raise ValueError(f"a lease key holds a line break: {[k for k in keys if separator in k][:1]}")
    return separator.join(keys), separator


def try_take_many(db: Connection, keys: list[str], owner: str, ttl: float) -> dict[str, str]:
    """Take or renew ``keys`` for ``owner``; returns the keys another live owner holds, with that owner."""
    from runjob_core.store import leases as _leases

    keys = sorted(set(keys))
    now = time.time()
    held: dict[str, str] = {}
    take: list[str] = []
    db._run("execute", "BEGIN", ())
    try:
        pending = keys
        while pending:
            new = {row[0] for row in db._run("execute",
                "INSERT INTO leases(key, owner, expires_at) SELECT k, %s, %s FROM unnest(%s::text[]) AS k ORDER BY k"
                " ON CONFLICT (key) DO NOTHING RETURNING key", (owner, now + ttl, pending))}
            rest = [key for key in pending if key not in new]
            seen = set()
            if rest:
                for key, other, expires_at in db._run("execute",
                        "SELECT key, owner, expires_at FROM leases WHERE key = ANY(%s) ORDER BY key FOR UPDATE", (rest,)):
                    seen.add(key)
                    if other != owner and _leases._held_by_other(other, expires_at, now):
                        held[key] = other
                    else:
                        take.append(key)
            # A row that was there for the INSERT and gone for the SELECT (released in between):
            # insert it again, or another taker could insert it and both would think they hold it.
            pending = [key for key in rest if key not in seen]
        if take:
            db._run("execute", "UPDATE leases SET owner = %s, expires_at = %s WHERE key = ANY(%s)",
                    (owner, now + ttl, take))
        db._run("execute", "COMMIT", ())
    except BaseException:
        db.rollback_quietly()
        raise
    return held


def try_take(db: Connection, key: str, owner: str, ttl: float) -> str | None:
    """Take or renew ``key`` for ``owner``; None on success, else the live holder."""
    return try_take_many(db, [key], owner, ttl).get(key)


def holders(db: Connection, keys: list[str], owner: str) -> dict[str, str]:
    """The keys of *keys* held by a live owner other than *owner* (read only): one statement with
    one array parameter, however many keys (the monitor asks for every job it follows each cycle)."""
    from runjob_core.store import leases as _leases

    now = time.time()
    # A join with the unnested keys (hashed), not key = ANY(array): that compares every row with every key.
    rows = db._run("execute", "SELECT l.key, l.owner, l.expires_at FROM leases l JOIN unnest(string_to_array(%s, %s))"
                   " AS k(key) ON l.key = k.key", _key_list(keys))
    return {key: other for key, other, expires_at in rows
            if other != owner and _leases._held_by_other(other, expires_at, now)}
