"""The state store's tables, the steps that bring an older database to their current layout,
and the SQLite file they live in (private modes, WAL).

One schema and one set of migrations serve SQLite and PostgreSQL
(:mod:`runjob_core.store.postgres` translates the few words that differ): :func:`upgrade`
runs them, once however many runjobs open the state at once.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.store import leases as _leases

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    cluster TEXT NOT NULL,
    backend TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    spec_path TEXT,
    kind TEXT NOT NULL DEFAULT 'full',
    created_at REAL NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    script TEXT
);
CREATE INDEX IF NOT EXISTS jobs_name ON jobs(name, created_at);
CREATE TABLE IF NOT EXISTS attempts(
    job_id TEXT NOT NULL REFERENCES jobs(id),
    n INTEGER NOT NULL,
    tag TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    backend_job_id TEXT,
    submission_json TEXT,
    submitted_at REAL,
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,
    reason TEXT,
    resumed_from TEXT,
    step INTEGER,
    rows_done INTEGER,
    PRIMARY KEY(job_id, n)
);
CREATE TABLE IF NOT EXISTS events(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT,
    attempt INTEGER,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    message TEXT NOT NULL,
    data_json TEXT
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id, id);
CREATE TABLE IF NOT EXISTS log_offsets(
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    stream TEXT NOT NULL,
    "offset" INTEGER NOT NULL,
    PRIMARY KEY(job_id, attempt, stream)
);
CREATE TABLE IF NOT EXISTS artifacts(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL,
    attempt INTEGER,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    location TEXT NOT NULL,
    source TEXT NOT NULL,
    rows INTEGER,
    data_json TEXT,
    created_at REAL NOT NULL
);
"""

#: An attempt whose end was recorded and whose follow-up (resume, retry, outcome) is not yet
#: done: a monitor killed in between finds it here and does it (see runjob_core.monitor).
_PENDING_ACTIONS = """
CREATE TABLE IF NOT EXISTS pending_actions(
    job_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY(job_id, n)
)
"""


#: The layout of the tables above, kept in ``PRAGMA user_version``. Raise it with every
#: change, and add the step from the previous version to ``_MIGRATIONS``.
SCHEMA_VERSION = 9
#: The oldest layout whose runjob can still use a database of this layout (kept in the
#: ``meta`` table). Added nullable columns and new tables keep it: older runjobs ignore
#: them. Raise it to SCHEMA_VERSION for a change they would misread (a rename, a new
#: NOT NULL column, a changed meaning).
OLDEST_COMPATIBLE = 1


def _add_who_columns(db) -> None:
    """Schema 5: the ``who`` column of jobs, attempts and events, where it is not there yet."""
    for table in ("jobs", "attempts", "events"):
        if "who" not in db.columns(table):
            db.execute(f"ALTER TABLE {table} ADD COLUMN who TEXT")


_SWEEPS = """
CREATE TABLE IF NOT EXISTS sweeps(
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    elements_json TEXT NOT NULL,
    max_parallel INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    who TEXT
)
"""


def _add_sweep_columns(db) -> None:
    """Schema 6: the sweep a job is an element of, and its index there, where not there yet."""
    columns = set(db.columns("jobs"))
    for column, kind in (("sweep_id", "TEXT"), ("sweep_index", "INTEGER")):
        if column not in columns:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
    db.execute("CREATE INDEX IF NOT EXISTS jobs_sweep ON jobs(sweep_id, sweep_index)")


def _add_change_counter(db) -> None:
    """Schema 7: on PostgreSQL, a counter of the changes to jobs and attempts, moved by the
    statement that changes them in the same transaction (:meth:`postgres.Connection.data_version`
    reads one row instead of scanning both tables). SQLite has ``PRAGMA data_version``: nothing to add."""
    if db.dialect == "postgresql":
        from runjob_core.store import postgres as _postgres

        _postgres.add_change_counter(db)


#: version -> statements (SQL, or a function of the connection) that bring a database of that
#: version to the next one. Version 0 is a database from before versions were kept; its tables
#: are already those of version 1. ``_SCHEMA`` stays the layout of version 1: a new database is
#: made from it plus every step.
_MIGRATIONS: dict[int, tuple[Any, ...]] = {
    0: (),
    # 2: the machine a backend created for an attempt (runjob_provision) and when it was released.
    1: ("ALTER TABLE attempts ADD COLUMN machine_json TEXT", "ALTER TABLE attempts ADD COLUMN released_at REAL"),
    # 3: the metrics history (loss, reward, ... per attempt and step), for the report and the dashboard;
    # the index covers every column a dashboard reads.
    2: ("CREATE TABLE IF NOT EXISTS metrics(job_id TEXT NOT NULL, attempt INTEGER NOT NULL, series TEXT NOT NULL,"
        " step REAL, ts REAL, value REAL NOT NULL, source TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS metrics_job ON metrics(job_id, series, attempt, step, ts, value)"),
    # 4: leases (one writer per job) and the follow-ups a killed monitor left (runjob_core.store.leases).
    3: (_leases.SCHEMA, _PENDING_ACTIONS),
    # 5: who (user@host, runjob_core.store.locator.who) made each job, attempt and event, for a state
    # shared by a team. Nullable: rows from before stay unattributed.
    4: (_add_who_columns,),
    # 6: sweeps (one spec, many jobs: runjob_core.sweep): the sweep's record, and each job's sweep and
    # element index. A new table and nullable columns: older runjobs ignore them.
    5: (_SWEEPS, _add_sweep_columns),
    # 7: PostgreSQL's change counter of jobs and attempts (what the monitor's caches key on); SQLite: none.
    6: (_add_change_counter,),
    # 8: the jobs by creation time: `runjob status` lists the latest 20 by reading 20 index entries, where
    # SQLite sorted every job row, specs and scripts included (6 ms at 2,000 jobs, 0.04 ms with it).
    7: ("CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at)",),
    # 9: the jobs by name and kind: every submit asks for the name's latest canary, which read every
    # job row of that name, spec and script included, for its kind (~2 ms of a submit at 300 jobs of
    # one name, 0.03 ms with it); the same-spec lookups of a submit without --new read only that kind.
    8: ("CREATE INDEX IF NOT EXISTS jobs_kind ON jobs(name, kind, created_at)",),
}


def upgrade(db, where: Path | str) -> None:
    """Create or upgrade the schema of *db* (the state *where* names, for messages), once
    however many runjobs open the state at once (SQLite: BEGIN IMMEDIATE; PostgreSQL: the same
    words take an advisory lock)."""
    version = db.schema_version()
    if version > SCHEMA_VERSION:
        row = db.execute("SELECT value FROM meta WHERE key = 'oldest_compatible'").fetchone()
        oldest = int(row[0]) if row else version
        if oldest > SCHEMA_VERSION:
            # This runjob would misread or damage what the newer one keeps there.
            raise RunjobError(f"{where} was written by a newer runjob (state schema {version}, usable from "
                              f"schema {oldest}; this runjob has {SCHEMA_VERSION}): upgrade runjob "
                              "(pip install -U runjob-core), or set RUNJOB_HOME to another folder")
        return  # newer, compatible: extra columns are ignored when reading
    if version == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")  # one process upgrades; the others wait, then see it done
    try:
        version = db.schema_version()
        fresh = not db.has_table("jobs")
        if version < SCHEMA_VERSION:
            # _SCHEMA is the layout of version 1; later versions are its migrations.
            # Statement by statement, as executescript would commit.
            schema = [statement for statement in (part.strip() for part in _SCHEMA.split(";")) if statement]
            if fresh:
                for statement in schema:
                    db.execute(statement)
            for step in range(max(version, 1) if fresh else version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:  # SQL, or a function of the connection
                    if isinstance(statement, str):
                        db.execute(statement)
                    else:
                        statement(db)
            for statement in schema:  # new tables and indexes of an older database
                db.execute(statement)
            db.execute("INSERT INTO meta(key, value) VALUES ('oldest_compatible', ?)"
                       " ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(OLDEST_COMPATIBLE),))
            db.set_schema_version(SCHEMA_VERSION)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def make_private(path: Path) -> bool:
    """The state folder 0700 and the database 0600 (SQLite gives its -wal and -shm files the
    database's mode): jobs' scripts, logs and records are the user's alone. A folder made
    before (by an older runjob, or by hand for clusters.yaml) is tightened if it is ours.
    True when the database file was created here."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    created = False
    for target, mode in ((folder, 0o700), (path, 0o600)):
        if target is path and not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            created = True
            continue
        st = target.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            target.chmod(mode)
    return created


def use_wal(db: sqlite3.Connection, patience: float = 30.0) -> None:
    """Put the database in WAL mode (kept in the file: a no-op after the first time).

    Turning a new file to WAL takes SQLite's exclusive lock, and SQLite answers "database is
    locked" at once, without the busy timeout, when another process holds it: two `runjob run`s
    in a fresh folder met that on CI. Wait for it here as the busy timeout would."""
    deadline = time.monotonic() + patience
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
