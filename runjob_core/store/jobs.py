"""The Store's jobs and sweeps: recording them, finding them by id or name, and their states.

New job ids are made here too (:func:`new_job_id`): sortable by time, never repeated by one
process.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from runjob_core.errors import JobNotFoundError
from runjob_core.redact import redact
from runjob_core.store import rows as _rows
from runjob_core.store.rows import JobHead, JobRow, SweepRow
from runjob_core.store.tables import Tables


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


class Jobs(Tables):
    """The Store's methods on the jobs and sweeps tables."""

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
        return _rows.to_record(JobRow, row)

    def job_heads(self, job_ids: list[str]) -> dict[str, JobHead]:
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        return {head.id: head for head in _rows.to_records(JobHead, self._db.execute(
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
        return _rows.to_record(JobRow, row)

    def latest_canary(self, name: str) -> JobRow | None:
        row = self._db.execute(
            "SELECT * FROM jobs WHERE name = ? AND kind = 'canary' ORDER BY created_at DESC, rowid DESC LIMIT 1", (name,)
        ).fetchone()
        return _rows.to_record(JobRow, row) if row else None

    def list_jobs(self, *, limit: int = 50, user: str | None = None) -> list[JobRow]:
        """The latest ``limit`` jobs; only those ``user`` created (the part of ``who`` before the @) if given."""
        if user is None:
            rows = self._db.execute("SELECT * FROM jobs ORDER BY created_at DESC, rowid DESC LIMIT ?", (limit,))
        else:
            prefix = user + "@"
            rows = self._db.execute("SELECT * FROM jobs WHERE substr(who, 1, ?) = ?"
                                    " ORDER BY created_at DESC, rowid DESC LIMIT ?", (len(prefix), prefix, limit))
        return _rows.to_records(JobRow, rows)

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
        return _rows.to_record(SweepRow, row) if row else None

    def list_sweeps(self) -> list[SweepRow]:
        """Every sweep, newest first."""
        return _rows.to_records(SweepRow, self._db.execute("SELECT * FROM sweeps ORDER BY created_at DESC, rowid DESC"))

    def set_sweep_state(self, sweep_id: str, state: str) -> None:
        self._db.execute("UPDATE sweeps SET state = ? WHERE id = ?", (state, sweep_id))

    def sweep_jobs(self, sweep_id: str) -> list[JobRow]:
        """The jobs of a sweep's elements, by element index, oldest first within an index."""
        rows = self._db.execute("SELECT * FROM jobs WHERE sweep_id = ? ORDER BY sweep_index, created_at, rowid", (sweep_id,))
        return _rows.to_records(JobRow, rows)

    def sweep_job_states(self, sweep_id: str) -> dict[int, tuple[str, str, str | None]]:
        """Element index -> (id, state, outcome) of its latest full job: what the element table
        shows, without each job's spec and script (a 1,000-element sweep's ~5 MB, read past
        their pages: ~4 ms where :meth:`sweep_jobs` takes ~13)."""
        rows = self._db.execute("SELECT sweep_index, id, state, outcome FROM jobs WHERE sweep_id = ? AND kind = 'full'"
                                " ORDER BY sweep_index, created_at, rowid", (sweep_id,)).fetchall()
        return {row[0]: (row[1], row[2], row[3]) for row in rows}  # the latest of an index last, as sweep_jobs
