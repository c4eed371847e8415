"""The store's rows as frozen records (:class:`JobRow`, :class:`AttemptRow`, ...), and how
the rows of a query become records: fast, and tolerant of a database written by a newer
runjob (columns the record does not know are left out)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any


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


def who_of(row: sqlite3.Row) -> str | None:
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


def to_record(cls, row: sqlite3.Row):
    # Only the columns the record knows: a database written by a newer runjob still reads.
    return to_records(cls, [row])[0]


def to_records(cls, rows) -> list:
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
        plain_rows(rows)
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


def plain_rows(cursor) -> None:
    """Have *cursor* (SQLite's or psycopg's, before its rows are fetched) give plain tuples."""
    if isinstance(cursor, sqlite3.Cursor):
        cursor.row_factory = None
    else:
        from runjob_core.store import postgres as _postgres

        _postgres.plain_rows(cursor)
