"""The state store: jobs, attempts, the activity log, log offsets and artifacts.

SQLite in WAL mode at ``.runjob/state.db`` of the working directory (``$RUNJOB_HOME``
overrides the folder), or a PostgreSQL database shared by a team (``RUNJOB_STATE_URL`` or
the ``state:`` key of a config file, :mod:`runjob_core.store.locator`): one schema, one set
of migrations and one set of methods serve both (:mod:`runjob_core.store.postgres`
translates the few words that differ). The store is runjob's memory: a monitor killed at any moment and
started again carries on from here, and an attempt recorded as ``SUBMITTING`` is
reattached by its tag instead of being submitted twice.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runjob_core.store import leases as _leases

from runjob_core.store import faults as _store_faults
from runjob_core.store import locator as _locator
from runjob_core.errors import JobNotFoundError, RunjobError
from runjob_core.redact import redact

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

#: SQLite's WAL past this size is emptied once a warm command has answered (Store.settle_wal).
WAL_SETTLE_AT = 1 << 20

#: Points kept per job, attempt and metric series: past this, every other point is dropped
#: (first and last kept), so a long run keeps its shape in a bounded table.
MAX_METRIC_POINTS = 4000


def attempt_tag(job_id: str, n: int) -> str:
    """The tag of attempt *n* of job *job_id*: what the backend attaches to the job."""
    return f"runjob:{job_id}:{n}"


def _private(path: Path) -> bool:
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


def _use_wal(db: sqlite3.Connection, patience: float = 30.0) -> None:
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


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def state_dir(cwd: Path | None = None) -> Path:
    """The folder holding state.db: $RUNJOB_HOME, else ./.runjob."""
    override = os.environ.get("RUNJOB_HOME")
    return Path(override) if override else (cwd or Path.cwd()) / ".runjob"


@dataclass(frozen=True)
class JobRow:
    id: str
    name: str
    cluster: str
    backend: str
    spec_json: str
    spec_hash: str
    spec_path: str | None
    kind: str
    created_at: float
    state: str
    outcome: str | None
    script: str | None
    #: user@host that created the job (None for jobs from before schema 5).
    who: str | None = None
    #: The sweep this job is an element of, and its index there (None for a job of its own).
    sweep_id: str | None = None
    sweep_index: int | None = None

    @property
    def spec(self):
        from runjob_core.config import job_from_json

        return job_from_json(self.spec_json)


@dataclass(frozen=True)
class AttemptRow:
    job_id: str
    n: int
    tag: str
    state: str
    backend_job_id: str | None
    submission_json: str | None
    submitted_at: float | None
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    reason: str | None
    resumed_from: str | None
    step: int | None
    rows_done: int | None
    machine_json: str | None = None
    released_at: float | None = None
    #: user@host that began the attempt (None for attempts from before schema 5).
    who: str | None = None

    @property
    def submission(self):
        from runjob_core.config import record_from_json
        from runjob_core.models import Submission

        return record_from_json(self.submission_json, Submission) if self.submission_json else None

    @property
    def machine(self):
        """The machine provisioned for this attempt (:class:`~runjob_core.models.Machine`), if any."""
        from runjob_core.config import record_from_json
        from runjob_core.models import Machine

        return record_from_json(self.machine_json, Machine) if self.machine_json else None


@dataclass(frozen=True)
class SweepRow:
    """One sweep: a spec with a ``sweep:`` key, recorded once; its elements are ordinary jobs."""

    id: str
    name: str
    spec_hash: str
    spec_json: str
    #: [{"index", "name", "values", "spec_hash"}, ...] in element order.
    elements_json: str
    max_parallel: int
    #: ``active``, or ``cancelled`` (``runjob cancel SWEEP``: no element is started any more).
    state: str
    created_at: float
    who: str | None = None

    @property
    def elements(self) -> list[dict[str, Any]]:
        return json.loads(self.elements_json)


@dataclass(frozen=True)
class JobHead:
    """What the monitor needs of a job each cycle: not its spec or script (kilobytes each)."""

    id: str
    name: str
    cluster: str
    outcome: str | None


@dataclass(frozen=True)
class EventRow:
    id: int
    job_id: str | None
    attempt: int | None
    ts: float
    kind: str
    source: str
    message: str
    data: dict[str, Any]
    #: user@host of the process that wrote it (None for events from before schema 5).
    who: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "job_id": self.job_id, "attempt": self.attempt, "ts": self.ts,
            "kind": self.kind, "source": self.source, "message": self.message, "data": self.data,
            "who": self.who,
        }


def _who_of(row: sqlite3.Row) -> str | None:
    # A newer-but-compatible or older database may lack the column.
    return row["who"] if "who" in row.keys() else None


@dataclass(frozen=True)
class ArtifactRow:
    id: int
    job_id: str
    attempt: int | None
    name: str
    kind: str
    location: str
    source: str
    rows: int | None
    data: dict[str, Any]
    created_at: float


def _make(cls, row: sqlite3.Row):
    # Only the columns the record knows: a database written by a newer runjob still reads.
    return _make_all(cls, [row])[0]


def _make_all(cls, rows) -> list:
    """Records from the rows of one query (a cursor, or a list of rows); the column plan is
    worked out once per query (the monitor reads every followed job's rows each cycle, and
    ``runjob status -n 10000`` ten thousand jobs).

    A cursor's rows are fetched as plain tuples (``sqlite3.Row`` and the PostgreSQL row class
    cost as much again as the records), and when the query's columns are the record's fields,
    in order, the frozen records are filled without their generated ``__init__`` (which sets
    each field through ``object.__setattr__``): half the time for the same records."""
    if hasattr(rows, "description"):
        description = rows.description
        if description is None:
            return []
        columns = [column[0] for column in description]
        _plain_rows(rows)
        rows = rows.fetchall()
    else:
        rows = list(rows)
        if not rows:
            return []
        columns = list(rows[0].keys())
    if not rows:
        return []
    known = cls.__dataclass_fields__
    if columns == list(known):  # the usual case: the table's columns are the record's fields
        new = object.__new__
        made = []
        for row in rows:
            record = new(cls)
            record.__dict__.update(zip(columns, row))
            made.append(record)
        return made
    plan = [(index, name) for index, name in enumerate(columns) if name in known]
    return [cls(**{name: row[index] for index, name in plan}) for row in rows]


def _plain_rows(cursor) -> None:
    """Have *cursor* (SQLite's or psycopg's, before its rows are fetched) give plain tuples."""
    if isinstance(cursor, sqlite3.Cursor):
        cursor.row_factory = None
    else:
        from runjob_core.store import postgres as _postgres

        _postgres.plain_rows(cursor)


def new_job_id() -> str:
    """A new job id, sortable by time: ``rj-<seconds, base 36><6 random base-36 digits>``
    (SLURM's reattach reads the seconds back: the length stays).

    A sweep makes thousands in a second: this process never repeats one (it remembers this
    second's), and with 31 random bits two 1,000-element sweeps recorded by two processes in
    the same second share an id once in ~2,000 such pairs (6 hex digits, 24 bits, repeated an
    id within one 1,000-element sweep 3% of the time: UNIQUE constraint failed)."""
    second = _base36(int(time.time()))
    if _ids_made[0] != second:
        _ids_made[:] = [second, set()]
    while True:
        job_id = "rj-" + second + _base36(secrets.randbelow(_RANDOM_IDS)).rjust(6, "0")  # one draw, not six
        if job_id not in _ids_made[1]:
            _ids_made[1].add(job_id)
            return job_id


#: The second of the latest :func:`new_job_id` and the ids made in it (this process's).
_ids_made: list = ["", set()]
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_RANDOM_IDS = 36 ** 6  # the ids' 6 random base-36 digits


def _base36(number: int) -> str:
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = _DIGITS[rest] + out
    return out or "0"


class Store:
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
            created = False if in_memory else _private(path)
            self._db = sqlite3.connect(path, timeout=30, isolation_level=None, factory=_store_faults.Connection)
            #: The file this store opened: another process may set it aside as damaged (see :meth:`generation`).
            self._file_id = None if in_memory else _file_id(path)
        except (OSError, sqlite3.Error) as exc:
            raise _store_faults.translate(exc, path) from None
        self._db.store_path = path
        self._db.row_factory = sqlite3.Row
        try:
            _use_wal(self._db)
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._upgrade()
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
            self._upgrade()
        except BaseException:
            self._db.close()
            raise

    def _upgrade(self) -> None:
        """Create or upgrade the schema, once however many runjobs open the state at once
        (SQLite: BEGIN IMMEDIATE; PostgreSQL: the same words take an advisory lock)."""
        version = self._db.schema_version()
        if version > SCHEMA_VERSION:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'oldest_compatible'").fetchone()
            oldest = int(row[0]) if row else version
            if oldest > SCHEMA_VERSION:
                # This runjob would misread or damage what the newer one keeps there.
                raise RunjobError(f"{self.path} was written by a newer runjob (state schema {version}, usable from "
                                  f"schema {oldest}; this runjob has {SCHEMA_VERSION}): upgrade runjob "
                                  "(pip install -U runjob-core), or set RUNJOB_HOME to another folder")
            return  # newer, compatible: extra columns are ignored when reading
        if version == SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")  # one process upgrades; the others wait, then see it done
        try:
            version = self._db.schema_version()
            fresh = not self._db.has_table("jobs")
            if version < SCHEMA_VERSION:
                # _SCHEMA is the layout of version 1; later versions are its migrations.
                # Statement by statement, as executescript would commit.
                schema = [statement for statement in (part.strip() for part in _SCHEMA.split(";")) if statement]
                if fresh:
                    for statement in schema:
                        self._db.execute(statement)
                for step in range(max(version, 1) if fresh else version, SCHEMA_VERSION):
                    for statement in _MIGRATIONS[step]:  # SQL, or a function of the connection
                        if isinstance(statement, str):
                            self._db.execute(statement)
                        else:
                            statement(self._db)
                for statement in schema:  # new tables and indexes of an older database
                    self._db.execute(statement)
                self._db.execute("INSERT INTO meta(key, value) VALUES ('oldest_compatible', ?)"
                                 " ON CONFLICT(key) DO UPDATE SET value = excluded.value", (str(OLDEST_COMPATIBLE),))
                self._db.set_schema_version(SCHEMA_VERSION)
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
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

    # ------------------------------------------------------------------ jobs

    def create_job(
        self, *, job_id: str | None = None, name: str, cluster: str, backend: str, spec_json: str, spec_hash: str,
        spec_path: str | None, kind: str = "full", sweep_id: str | None = None, sweep_index: int | None = None,
    ) -> str:
        job_id = job_id or new_job_id()
        self._db.execute(
            "INSERT INTO jobs(id, name, cluster, backend, spec_json, spec_hash, spec_path, kind, created_at, state, who,"
            " sweep_id, sweep_index) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (job_id, name, cluster, backend, spec_json, spec_hash, spec_path, kind, time.time(), "NEW", self.who,
             sweep_id, sweep_index),
        )
        return job_id

    def get_job(self, job_id: str) -> JobRow:
        row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobNotFoundError(f"no job with id {job_id!r} in {self.path}")
        return _make(JobRow, row)

    def job_heads(self, job_ids: list[str]) -> dict[str, JobHead]:
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        return {head.id: head for head in _make_all(JobHead, self._db.execute(
            f"SELECT id, name, cluster, outcome FROM jobs WHERE id {among}", params))}

    def find_job(self, ref: str) -> JobRow:
        """A job by its runjob id, or the latest job with that name."""
        row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (ref,)).fetchone()
        if row is None:
            row = self._db.execute(
                "SELECT * FROM jobs WHERE name = ? AND kind = 'full' ORDER BY created_at DESC, rowid DESC LIMIT 1", (ref,)
            ).fetchone()
        if row is None:
            row = self._db.execute(
                "SELECT * FROM jobs WHERE name = ? ORDER BY created_at DESC, rowid DESC LIMIT 1", (ref,)
            ).fetchone()
        if row is None:
            names = [r[0] for r in self._db.execute("SELECT name FROM jobs GROUP BY name ORDER BY MAX(created_at) DESC"
                                                    " LIMIT 8")]
            known = f"; recent jobs: {', '.join(names)}" if names else "; no jobs recorded yet (runjob submit JOB.yaml)"
            raise JobNotFoundError(f"no job with id or name {ref!r} in {self.path}{known}")
        return _make(JobRow, row)

    def latest_canary(self, name: str) -> JobRow | None:
        row = self._db.execute(
            "SELECT * FROM jobs WHERE name = ? AND kind = 'canary' ORDER BY created_at DESC, rowid DESC LIMIT 1", (name,)
        ).fetchone()
        return _make(JobRow, row) if row else None

    def list_jobs(self, *, limit: int = 50, user: str | None = None) -> list[JobRow]:
        """The latest ``limit`` jobs; only those ``user`` created (the part of ``who`` before the @) if given."""
        if user is None:
            rows = self._db.execute("SELECT * FROM jobs ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,))
        else:
            prefix = user + "@"
            rows = self._db.execute("SELECT * FROM jobs WHERE substr(who, 1, ?) = ?"
                                    " ORDER BY created_at DESC, rowid DESC LIMIT ?", (len(prefix), prefix, limit))
        return _make_all(JobRow, rows)

    def set_job(self, job_id: str, **fields: Any) -> None:
        allowed = {"state", "outcome", "script", "sweep_id", "sweep_index"}
        assert set(fields) <= allowed, fields
        if fields.get("outcome"):
            fields["outcome"] = redact(fields["outcome"])  # often a line the job printed
        assignments = ", ".join(f"{k} = ?" for k in fields)
        self._db.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), job_id))

    # ------------------------------------------------------------------ sweeps

    def create_sweep(self, *, sweep_id: str, name: str, spec_hash: str, spec_json: str, elements_json: str,
                     max_parallel: int) -> None:
        self._db.execute(
            "INSERT INTO sweeps(id, name, spec_hash, spec_json, elements_json, max_parallel, state, created_at, who)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (sweep_id, name, spec_hash, spec_json, elements_json, max_parallel, "active", time.time(), self.who))

    def find_sweep(self, ref: str, *, spec_hash: str | None = None) -> SweepRow | None:
        """A sweep by its id, else the latest with that name (and *spec_hash*, if given); None if none."""
        row = None if spec_hash else self._db.execute("SELECT * FROM sweeps WHERE id = ?", (ref,)).fetchone()
        if row is None:
            query = "SELECT * FROM sweeps WHERE name = ?" + (" AND spec_hash = ?" if spec_hash else "")
            row = self._db.execute(query + " ORDER BY created_at DESC, rowid DESC LIMIT 1",
                                   (ref, spec_hash) if spec_hash else (ref,)).fetchone()
        return _make(SweepRow, row) if row else None

    def list_sweeps(self) -> list[SweepRow]:
        """Every sweep, newest first."""
        return _make_all(SweepRow, self._db.execute("SELECT * FROM sweeps ORDER BY created_at DESC, rowid DESC"))

    def set_sweep_state(self, sweep_id: str, state: str) -> None:
        self._db.execute("UPDATE sweeps SET state = ? WHERE id = ?", (state, sweep_id))

    def sweep_jobs(self, sweep_id: str) -> list[JobRow]:
        """The jobs of a sweep's elements, by element index, oldest first within an index."""
        rows = self._db.execute("SELECT * FROM jobs WHERE sweep_id = ? ORDER BY sweep_index, created_at, rowid", (sweep_id,))
        return _make_all(JobRow, rows)

    # ------------------------------------------------------------------ attempts

    def begin_attempt(self, job_id: str, *, resumed_from: str | None = None, n: int | None = None) -> AttemptRow:
        """Record a new attempt as SUBMITTING with its tag, before anything is submitted.
        *n*: its number when the cluster told it already (an adopted job's attempt)."""
        with self._transaction():
            if n is None:
                n = self._db.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM attempts WHERE job_id = ?", (job_id,)).fetchone()[0]
            tag = attempt_tag(job_id, n)
            self._db.execute(
                "INSERT INTO attempts(job_id, n, tag, state, resumed_from, who) VALUES (?,?,?,?,?,?)",
                (job_id, n, tag, "SUBMITTING", resumed_from, self.who),
            )
            self._db.execute("UPDATE jobs SET state = 'SUBMITTING' WHERE id = ?", (job_id,))
        return self.attempt(job_id, n)

    def begin_first_attempts(self, jobs: list[dict[str, Any]]) -> None:
        """:meth:`create_job` then :meth:`begin_attempt` (n=1) of many new jobs (keyword dicts of
        :meth:`create_job`, ``job_id`` given) in one transaction and two statements, each job
        ``SUBMITTING`` at once: a 1,000-element sweep's elements, where one at a time was 4,000."""
        now = time.time()
        with self._transaction():
            self._db.executemany(
                "INSERT INTO jobs(id, name, cluster, backend, spec_json, spec_hash, spec_path, kind, created_at, state,"
                " who, sweep_id, sweep_index) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(job["job_id"], job["name"], job["cluster"], job["backend"], job["spec_json"], job["spec_hash"],
                  job["spec_path"], job.get("kind", "full"), now, "SUBMITTING", self.who, job.get("sweep_id"),
                  job.get("sweep_index")) for job in jobs])
            self._db.executemany(
                "INSERT INTO attempts(job_id, n, tag, state, resumed_from, who) VALUES (?,?,?,?,?,?)",
                [(job["job_id"], 1, attempt_tag(job["job_id"], 1), "SUBMITTING", None, self.who) for job in jobs])

    def set_scripts(self, scripts: dict[str, str]) -> None:
        """``set_job(job_id, script=...)`` of many jobs in one statement."""
        self._db.executemany("UPDATE jobs SET script = ? WHERE id = ?", [(script, job_id) for job_id, script in scripts.items()])

    def record_submissions(self, submissions: list[tuple[str, int, str, str, float]]) -> None:
        """:meth:`record_submission` of many (job id, n, submission JSON, backend job id,
        submitted at) in one transaction and two statements."""
        with self._transaction():
            self._db.executemany(
                "UPDATE attempts SET state = 'PENDING', backend_job_id = ?, submission_json = ?, submitted_at = ?"
                " WHERE job_id = ? AND n = ?",
                [(backend_job_id, submission_json, submitted_at, job_id, n)
                 for job_id, n, submission_json, backend_job_id, submitted_at in submissions])
            self._db.executemany("UPDATE jobs SET state = 'PENDING' WHERE id = ?", [(s[0],) for s in submissions])

    def record_submission(self, job_id: str, n: int, submission_json: str, backend_job_id: str, submitted_at: float) -> None:
        self.record_submissions([(job_id, n, submission_json, backend_job_id, submitted_at)])

    def update_attempt(self, job_id: str, n: int, **fields: Any) -> None:
        allowed = {"state", "started_at", "ended_at", "exit_code", "reason", "step", "rows_done", "resumed_from",
                   "machine_json", "released_at"}
        assert set(fields) <= allowed, fields
        if not fields:
            return
        if fields.get("reason"):
            fields["reason"] = redact(fields["reason"])
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self._transaction():
            self._db.execute(f"UPDATE attempts SET {assignments} WHERE job_id = ? AND n = ?", (*fields.values(), job_id, n))
            if "state" in fields:
                latest = self._db.execute("SELECT MAX(n) FROM attempts WHERE job_id = ?", (job_id,)).fetchone()[0]
                if latest == n:
                    self._db.execute("UPDATE jobs SET state = ? WHERE id = ?", (fields["state"], job_id))

    def delete_attempt(self, job_id: str, n: int) -> None:
        """Forget an attempt that was never submitted (the backend refused it)."""
        self._db.execute("DELETE FROM attempts WHERE job_id = ? AND n = ? AND backend_job_id IS NULL", (job_id, n))

    def attempt(self, job_id: str, n: int) -> AttemptRow:
        row = self._db.execute("SELECT * FROM attempts WHERE job_id = ? AND n = ?", (job_id, n)).fetchone()
        return _make(AttemptRow, row)

    def attempts(self, job_id: str) -> list[AttemptRow]:
        rows = self._db.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY n", (job_id,))
        return _make_all(AttemptRow, rows)

    def attempts_of(self, job_ids: list[str]) -> dict[str, list[AttemptRow]]:
        """The attempts of each of *job_ids* (in order of ``n``), in one query whatever their
        number: ``runjob status`` lists 20 jobs with one, not 20, and 10,000 with one, not 20."""
        found: dict[str, list[AttemptRow]] = {job_id: [] for job_id in job_ids}
        among, params = self._db.among(list(found))
        for row in _make_all(AttemptRow, self._db.execute(f"SELECT * FROM attempts WHERE job_id {among} ORDER BY job_id, n",
                                                          params)):
            found[row.job_id].append(row)
        return found

    def jobs_with_attempts(self, job_ids: list[str]) -> set[str]:
        """Which of *job_ids* have any attempt, in one statement."""
        if not job_ids:
            return set()
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        return {row[0] for row in self._db.execute(f"SELECT DISTINCT job_id FROM attempts WHERE job_id {among}", params)}

    def latest_attempt(self, job_id: str) -> AttemptRow | None:
        row = self._db.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY n DESC LIMIT 1", (job_id,)).fetchone()
        return _make(AttemptRow, row) if row else None

    def specs_with_jobs(self, specs: list[tuple[str, str]], kind: str) -> set[tuple[str, str]]:
        """Which (name, spec hash) pairs of *specs* have any job of *kind*, in one statement:
        a sweep's fresh elements (none) skip the one-by-one lookups of :meth:`find_active` and its kin."""
        among, params = self._db.among(sorted({name for name, _hash in specs}))
        found = {(name, spec_hash) for name, spec_hash in self._db.execute(
            f"SELECT name, spec_hash FROM jobs WHERE kind = ? AND name {among}", (kind, *params))}
        return found & set(specs)

    def find_active(self, name: str, spec_hash: str, kind: str) -> AttemptRow | None:
        """The latest active attempt of a job with this name, spec and kind (for reattaching)."""
        row = self._db.execute(
            "SELECT a.* FROM attempts a JOIN jobs j ON j.id = a.job_id"
            " WHERE j.name = ? AND j.spec_hash = ? AND j.kind = ?"
            " AND a.state IN ('SUBMITTING','PENDING','RUNNING','REQUEUED','CANCELLING')"
            " AND a.n = (SELECT MAX(n) FROM attempts WHERE job_id = a.job_id)"
            " ORDER BY j.created_at DESC LIMIT 1",
            (name, spec_hash, kind),
        ).fetchone()
        return _make(AttemptRow, row) if row else None

    def find_uncollected(self, name: str, spec_hash: str, kind: str) -> AttemptRow | None:
        """The latest attempt of the latest job with this spec if it COMPLETED and its results
        were never collected (runjob was stopped between the end and collect)."""
        row = self._db.execute(
            "SELECT a.* FROM jobs j JOIN attempts a ON a.job_id = j.id"
            " AND a.n = (SELECT MAX(n) FROM attempts WHERE job_id = j.id)"
            " WHERE j.name = ? AND j.spec_hash = ? AND j.kind = ?"
            " ORDER BY j.created_at DESC, j.rowid DESC LIMIT 1",
            (name, spec_hash, kind),
        ).fetchone()
        if row is None or row["state"] != "COMPLETED":
            return None
        collected = self._db.execute("SELECT 1 FROM events WHERE job_id = ? AND kind IN ('collected', 'collect_failed')"
                                     " LIMIT 1", (row["job_id"],)).fetchone()
        return None if collected else _make(AttemptRow, row)

    def mark_pending(self, job_id: str, n: int) -> None:
        self._db.execute("INSERT INTO pending_actions(job_id, n) VALUES (?,?) ON CONFLICT DO NOTHING", (job_id, n))

    def clear_pending(self, job_id: str, n: int) -> None:
        self._db.execute("DELETE FROM pending_actions WHERE job_id = ? AND n = ?", (job_id, n))

    def pending_actions(self, job_ids: list[str] | None = None) -> list[tuple[str, int]]:
        rows = self._db.execute("SELECT job_id, n FROM pending_actions ORDER BY job_id, n").fetchall()
        wanted = None if job_ids is None else set(job_ids)
        return [(r[0], r[1]) for r in rows if wanted is None or r[0] in wanted]

    def find_pending(self, name: str, spec_hash: str, kind: str) -> AttemptRow | None:
        """The ended attempt of a job with this spec whose follow-up (a resume) is not done yet."""
        row = self._db.execute(
            "SELECT a.* FROM pending_actions p JOIN attempts a ON a.job_id = p.job_id AND a.n = p.n"
            " JOIN jobs j ON j.id = a.job_id WHERE j.name = ? AND j.spec_hash = ? AND j.kind = ?"
            " ORDER BY j.created_at DESC LIMIT 1", (name, spec_hash, kind)).fetchone()
        return _make(AttemptRow, row) if row else None

    def active_attempts(self, job_ids: list[str] | None = None) -> list[AttemptRow]:
        """The active attempts of *job_ids*, or of every job when None (an empty list: none;
        it used to mean every job, and a new sweep with no jobs read all 20,000 of a state)."""
        active = "('SUBMITTING','PENDING','RUNNING','REQUEUED','CANCELLING')"
        if job_ids is not None and not job_ids:
            return []
        if job_ids:
            among, params = self._db.among(list(dict.fromkeys(job_ids)))
            rows = self._db.execute(f"SELECT * FROM attempts WHERE state IN {active} AND job_id {among}", params)
        else:
            rows = self._db.execute(f"SELECT * FROM attempts WHERE state IN {active}")
        return _make_all(AttemptRow, rows)

    def unreleased_machines(self, job_ids: list[str] | None = None) -> list[AttemptRow]:
        """Ended attempts whose machine (``runjob_provision``'s) was not given back yet: a
        runjob killed between an attempt's end and its release, or a release that failed.
        A forgotten attempt is left alone (runjob promised not to touch it)."""
        unsettled = ("machine_json IS NOT NULL AND released_at IS NULL AND state NOT IN "
                     "('SUBMITTING','PENDING','RUNNING','REQUEUED','CANCELLING','FORGOTTEN')")
        if job_ids:
            marks = ",".join("?" * len(job_ids))
            rows = self._db.execute(f"SELECT * FROM attempts WHERE {unsettled} AND job_id IN ({marks})", job_ids)
        else:
            rows = self._db.execute(f"SELECT * FROM attempts WHERE {unsettled}")
        return _make_all(AttemptRow, rows)

    # ------------------------------------------------------------------ events

    def add_event(
        self, job_id: str | None, kind: str, message: str, *, source: str = "runjob",
        attempt: int | None = None, data: dict[str, Any] | None = None,
    ) -> EventRow:
        return self.add_events([(job_id, kind, message, source, attempt, data)])[0]

    def add_events(self, events: list[tuple[str | None, str, str, str, int | None, dict[str, Any] | None]]) -> list[EventRow]:
        """:meth:`add_event` of many (job id, kind, message, source, attempt, data) at once: one
        multi-row ``INSERT ... RETURNING id`` per 500 (a 1,000-element sweep's 2,000 events were
        2,000 statements). Ids come back in insertion order on both databases: the rows of one
        statement take increasing ids (SQLite's AUTOINCREMENT under the write lock, a sequence
        per session on PostgreSQL), so the returned ids are sorted, not trusted to arrive in order."""
        made: list[EventRow] = []
        ts = time.time()
        for start in range(0, len(events), 500):
            chunk = [(job_id, attempt, ts, kind, source, redact(message),
                      redact(json.dumps(data, default=str)) if data else None, self.who)
                     for job_id, kind, message, source, attempt, data in events[start:start + 500]]
            marks = ",".join(["(?,?,?,?,?,?,?,?)"] * len(chunk))
            # fetchall: SQLite finishes the statement (and its write) only when stepped to the end.
            ids = sorted(row[0] for row in self._db.execute(
                f"INSERT INTO events(job_id, attempt, ts, kind, source, message, data_json, who) VALUES {marks}"
                " RETURNING id", [value for row in chunk for value in row]).fetchall())
            made += [EventRow(event_id, job_id, attempt, ts, kind, source, message,
                              json.loads(data_json) if data_json else {}, who)
                     for event_id, (job_id, attempt, ts, kind, source, message, data_json, who) in zip(ids, chunk)]
        return made

    def events(self, job_id: str | None = None, *, after_id: int = 0, kinds: tuple[str, ...] = ()) -> list[EventRow]:
        query = "SELECT * FROM events WHERE id > ?"
        params: list[Any] = [after_id]
        if job_id is not None:
            query += " AND job_id = ?"
            params.append(job_id)
        if kinds:
            query += f" AND kind IN ({','.join('?' * len(kinds))})"
            params.extend(kinds)
        rows = self._db.execute(query + " ORDER BY id", params)
        return [
            EventRow(r["id"], r["job_id"], r["attempt"], r["ts"], r["kind"], r["source"], r["message"],
                     json.loads(r["data_json"]) if r["data_json"] else {}, _who_of(r))
            for r in rows
        ]

    def events_of(self, job_ids: list[str], *, kinds: tuple[str, ...] = ()) -> dict[str, list[EventRow]]:
        """:meth:`events` of many jobs (job id -> its events, by id), one query whatever their number."""
        found: dict[str, list[EventRow]] = {}
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        kind_marks = f" AND kind IN ({','.join('?' * len(kinds))})" if kinds else ""
        rows = self._db.execute(f"SELECT * FROM events WHERE job_id {among}{kind_marks} ORDER BY id", (*params, *kinds))
        for r in rows.fetchall():
            found.setdefault(r["job_id"], []).append(
                EventRow(r["id"], r["job_id"], r["attempt"], r["ts"], r["kind"], r["source"], r["message"],
                         json.loads(r["data_json"]) if r["data_json"] else {}, _who_of(r)))
        return found

    # ------------------------------------------------------------------ log offsets

    def offset(self, job_id: str, attempt: int, stream: str = "log") -> int:
        row = self._db.execute(
            'SELECT "offset" FROM log_offsets WHERE job_id = ? AND attempt = ? AND stream = ?', (job_id, attempt, stream)
        ).fetchone()
        return row[0] if row else 0

    def set_offset(self, job_id: str, attempt: int, offset: int, stream: str = "log") -> None:
        self._db.execute(
            'INSERT INTO log_offsets(job_id, attempt, stream, "offset") VALUES (?,?,?,?)'
            ' ON CONFLICT(job_id, attempt, stream) DO UPDATE SET "offset" = excluded."offset"',
            (job_id, attempt, stream, offset),
        )

    # ------------------------------------------------------------------ artifacts

    def add_artifact(
        self, job_id: str, *, attempt: int | None, name: str, kind: str, location: str, source: str,
        rows: int | None = None, data: dict[str, Any] | None = None,
    ) -> None:
        self._db.execute(
            "INSERT INTO artifacts(job_id, attempt, name, kind, location, source, rows, data_json, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (job_id, attempt, name, kind, redact(location), source, rows,
             redact(json.dumps(data, default=str)) if data else None, time.time()),
        )

    def delete_artifacts(self, job_id: str, attempt: int) -> None:
        """Forget what collect recorded for one attempt (it is collected again)."""
        self._db.execute("DELETE FROM artifacts WHERE job_id = ? AND attempt = ?", (job_id, attempt))

    def artifacts(self, job_id: str) -> list[ArtifactRow]:
        rows = self._db.execute("SELECT * FROM artifacts WHERE job_id = ? ORDER BY id", (job_id,))
        return [
            ArtifactRow(r["id"], r["job_id"], r["attempt"], r["name"], r["kind"], r["location"], r["source"], r["rows"],
                        json.loads(r["data_json"]) if r["data_json"] else {}, r["created_at"])
            for r in rows
        ]

    def artifacts_of(self, job_ids: list[str]) -> dict[str, list[ArtifactRow]]:
        """:meth:`artifacts` of many jobs (job id -> its artifacts, by id), one query whatever their number."""
        found: dict[str, list[ArtifactRow]] = {job_id: [] for job_id in job_ids}
        among, params = self._db.among(list(found))
        cursor = self._db.execute(f"SELECT * FROM artifacts WHERE job_id {among} ORDER BY id", params)
        for r in cursor.fetchall():
            found[r["job_id"]].append(ArtifactRow(r["id"], r["job_id"], r["attempt"], r["name"], r["kind"], r["location"],
                                                  r["source"], r["rows"], json.loads(r["data_json"]) if r["data_json"] else {},
                                                  r["created_at"]))
        return found

    # ------------------------------------------------------------------ metrics history

    def add_metrics(self, job_id: str, attempt: int, points: list[tuple[str, float | None, float | None, float]],
                    *, source: str) -> None:
        """Append (series, step, ts, value) points of one attempt, then thin any series that
        grew past MAX_METRIC_POINTS."""
        if not points:
            return
        with self._transaction():
            self._db.executemany(
                "INSERT INTO metrics(job_id, attempt, series, step, ts, value, source) VALUES (?,?,?,?,?,?,?)",
                [(job_id, attempt, series, step, ts, value, source) for series, step, ts, value in points])
            for series in {p[0] for p in points}:
                count = self._db.execute("SELECT COUNT(*) FROM metrics WHERE job_id = ? AND attempt = ? AND series = ?",
                                         (job_id, attempt, series)).fetchone()[0]
                if count > MAX_METRIC_POINTS:
                    self._db.execute(
                        "DELETE FROM metrics WHERE rowid IN (SELECT rowid FROM (SELECT rowid, ROW_NUMBER() OVER"
                        " (ORDER BY step, ts, rowid) AS rn FROM metrics WHERE job_id = ? AND attempt = ? AND series = ?) AS numbered"
                        " WHERE rn % 2 = 0 AND rn < ?)", (job_id, attempt, series, count))

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

    def metrics(self, job_id: str, *, series: tuple[str, ...] = ()) -> list[tuple[int, str, float | None, float | None, float]]:
        """(attempt, series, step, ts, value) of a job (only *series* if given), by series, attempt and step."""
        where = f" AND series IN ({','.join('?' * len(series))})" if series else ""
        cursor = self._db.execute("SELECT attempt, series, step, ts, value FROM metrics WHERE job_id = ?" + where +
                                  " ORDER BY series, attempt, step, ts", (job_id, *series))
        _plain_rows(cursor)  # plain tuples: a dashboard reads a hundred thousand of them
        return cursor.fetchall()

    def metrics_of(self, job_ids: list[str], *, series: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
        """:meth:`metrics` of many jobs (job id -> its points), one query whatever their number."""
        found: dict[str, list[tuple]] = {}
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        where = f" AND series IN ({','.join('?' * len(series))})" if series else ""
        # In the index's order (job first): no sort of every point, and each job's points come together.
        cursor = self._db.execute(f"SELECT job_id, attempt, series, step, ts, value FROM metrics WHERE job_id {among}{where}"
                                  " ORDER BY job_id, series, attempt, step, ts", (*params, *series))
        _plain_rows(cursor)
        from itertools import groupby
        from operator import itemgetter

        for job_id, points in groupby(cursor.fetchall(), itemgetter(0)):
            found[job_id] = [point[1:] for point in points]
        return found

    def has_metrics(self, job_id: str, source: str, *, besides: str = "") -> bool:
        """Whether *source* recorded any series other than *besides* for the job."""
        return self._db.execute("SELECT 1 FROM metrics WHERE job_id = ? AND source = ? AND series != ? LIMIT 1",
                                (job_id, source, besides)).fetchone() is not None

    def last_metric_step(self, job_id: str, source: str) -> float | None:
        return self._db.execute("SELECT MAX(step) FROM metrics WHERE job_id = ? AND source = ?", (job_id, source)).fetchone()[0]

    def plugin_connection(self, schema: str):
        """The database connection, for a plugin that keeps rows of its own in the state
        database (the local backend's GPU queue), so they share its transactions and survive
        with it. *schema* holds the plugin's ``CREATE TABLE IF NOT EXISTS`` statements (table
        names prefixed with the plugin's), run once per store. On a PostgreSQL state the
        connection takes the same SQL (``?`` parameters, SQLite's types). Write inside
        :meth:`transaction`: two runjob processes then never interleave."""
        if schema not in self._plugin_schemas:
            with self._transaction():  # executescript would commit the open transaction
                for statement in schema.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
            self._plugin_schemas.add(schema)
        return self._db

    # ------------------------------------------------------------------ helpers

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    def transaction(self) -> _Transaction:
        """``with store.transaction():`` the writes in the block land together or not at all
        (a full disk mid-way loses nothing: the block is done again). Re-entrant."""
        return _Transaction(self._db)


class _Transaction:
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

