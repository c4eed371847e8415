"""Copying one state into another (``runjob state migrate``): a folder's SQLite state into a
lab's PostgreSQL state, without loss and idempotent on rerun.

Everything a state remembers is copied: jobs (their ids kept: random, so unique across
members), sweeps, attempts, log offsets, pending follow-ups, events, artifacts and metric
points. Leases are not: they belong to live processes. A row the target already has is
skipped, so a second run copies nothing and a run interrupted half-way is finished by the
next (the whole copy is one transaction of the target anyway):

* tables with a key (jobs, sweeps, attempts, log offsets, pending actions): by that key;
* events and artifacts, whose ids count up in each state: by their content (job, attempt,
  time, kind, source, message / name, location). An event keeps its id when the target has
  no row of that id, else it gets the target's next one (ids of a shared state were handed
  to other members' events already);
* metric points: by series (job, attempt, series): a series the target has is left as it is.
"""

from __future__ import annotations

from typing import Any

#: Tables copied by their primary key, parents first.
KEYED = ("jobs", "sweeps", "attempts", "log_offsets", "pending_actions")
#: Tables with a counted id, and the columns that tell one row from another.
COUNTED = {"events": ("job_id", "attempt", "ts", "kind", "source", "message"),
           "artifacts": ("job_id", "attempt", "name", "kind", "location", "created_at")}
METRIC_SERIES = ("job_id", "attempt", "series")


def _quote(column: str) -> str:
    return f'"{column}"'


def _columns(source, target, table: str) -> list[str]:
    have = set(target._db.columns(table))
    return [column for column in source._db.columns(table) if column in have]


def _count(store, table: str) -> int:
    return store._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def _insert(target, table: str, columns: list[str], rows: list[tuple], *, ignore: bool) -> None:
    if not rows:
        return
    names = ", ".join(_quote(c) for c in columns)
    marks = ", ".join("?" * len(columns))
    tail = " ON CONFLICT DO NOTHING" if ignore else ""
    target._db.executemany(f"INSERT INTO {table}({names}) VALUES ({marks}){tail}", rows)


def _copy_keyed(source, target, table: str) -> int:
    if not source._db.has_table(table) or not target._db.has_table(table):
        return 0
    columns = _columns(source, target, table)
    rows = [tuple(row) for row in source._db.execute(f"SELECT {', '.join(_quote(c) for c in columns)} FROM {table}")]
    before = _count(target, table)
    _insert(target, table, columns, rows, ignore=True)
    return _count(target, table) - before


def _copy_counted(source, target, table: str) -> int:
    key = COUNTED[table]
    columns = _columns(source, target, table)
    rest = [c for c in columns if c != "id"]
    known = {tuple(row) for row in target._db.execute(f"SELECT {', '.join(key)} FROM {table}")}
    taken = {row[0] for row in target._db.execute(f"SELECT id FROM {table}")}
    with_id, without_id = [], []
    for row in source._db.execute(f"SELECT {', '.join(_quote(c) for c in columns)} FROM {table} ORDER BY id"):
        values = dict(zip(columns, row))
        if tuple(values[c] for c in key) in known:
            continue
        if values["id"] in taken:
            without_id.append(tuple(values[c] for c in rest))
        else:
            with_id.append(tuple(values[c] for c in columns))
            taken.add(values["id"])
    _insert(target, table, columns, with_id, ignore=False)
    if with_id and target.shared:  # the sequence moves past the ids written by hand
        target._db.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))")
    _insert(target, table, rest, without_id, ignore=False)
    return len(with_id) + len(without_id)


def _copy_metrics(source, target) -> int:
    columns = _columns(source, target, "metrics")
    present = {tuple(row) for row in target._db.execute(f"SELECT DISTINCT {', '.join(METRIC_SERIES)} FROM metrics")}
    at = [columns.index(c) for c in METRIC_SERIES]
    rows = [tuple(row) for row in source._db.execute(f"SELECT {', '.join(_quote(c) for c in columns)} FROM metrics")
            if tuple(row[i] for i in at) not in present]
    _insert(target, "metrics", columns, rows, ignore=False)
    return len(rows)


def copy_state(source, target) -> dict[str, Any]:
    """Copy what *source* holds into *target* (two open :class:`~runjob_core.store.Store`\\ s);
    returns the rows copied per table (all zero on a rerun)."""
    copied: dict[str, Any] = {}
    with target.transaction():
        for table in KEYED:
            copied[table] = _copy_keyed(source, target, table)
        for table in COUNTED:
            copied[table] = _copy_counted(source, target, table)
        copied["metrics"] = _copy_metrics(source, target)
    return copied
