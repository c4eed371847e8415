"""The Store's activity log (events: what happened to each job, and to the state itself) and
how far each attempt's logs were read (log offsets: a restarted monitor reads on from there)."""

from __future__ import annotations

import json
import time
from typing import Any

from runjob_core.redact import redactor
from runjob_core.store import rows as _rows
from runjob_core.store.rows import EventRow
from runjob_core.store.tables import Tables


class Activity(Tables):
    """The Store's methods on the events and log_offsets tables."""

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
        clean = redactor()  # the environment's secrets read once for all of them
        for start in range(0, len(events), 500):
            batch = events[start:start + 500]
            texts = [json.dumps(data, default=str) if data else None for *_rest, data in batch]
            chunk = [(job_id, attempt, ts, kind, source, clean(message), clean(text) if text else None, self.who)
                     for (job_id, kind, message, source, attempt, _data), text in zip(batch, texts)]
            marks = ",".join(["(?,?,?,?,?,?,?,?)"] * len(chunk))
            # fetchall: SQLite finishes the statement (and its write) only when stepped to the end.
            ids = sorted(row[0] for row in self._db.execute(
                f"INSERT INTO events(job_id, attempt, ts, kind, source, message, data_json, who) VALUES {marks}"
                " RETURNING id", [value for row in chunk for value in row]).fetchall())
            made += [EventRow(event_id, job_id, attempt, ts, kind, source, message, _as_stored(data, text, data_json), who)
                     for event_id, (job_id, attempt, ts, kind, source, message, data_json, who), (*_rest, data), text
                     in zip(ids, chunk, batch, texts)]
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
                     json.loads(r["data_json"]) if r["data_json"] else {}, _rows.who_of(r))
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
                         json.loads(r["data_json"]) if r["data_json"] else {}, _rows.who_of(r)))
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


def _as_stored(data: dict | None, text: str | None, stored: str | None) -> dict:
    """An event's data as the store holds it (*stored*, its JSON after redaction): a copy of
    *data* when that is what reading it back gives (redaction changed nothing, and *data* is
    plain strings, numbers, booleans and None under string keys), else *stored* read back."""
    if not stored:
        return {}
    if stored == text and all(type(key) is str and (value is None or type(value) in (str, int, float, bool))
                              for key, value in data.items()):
        return dict(data)
    return json.loads(stored)
