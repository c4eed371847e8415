"""The Store's attempts: each submission of a job, from ``SUBMITTING`` (recorded before
anything is submitted, so a killed runjob reattaches by the tag instead of submitting twice)
to its end, the lookups that find one to reattach, and the follow-ups an ended attempt still
needs (``pending_actions``).
"""

from __future__ import annotations

import time
from typing import Any

from runjob_core.redact import redact
from runjob_core.store import rows as _rows
from runjob_core.store.rows import AttemptRow, JobRow
from runjob_core.store.tables import Tables


def attempt_tag(job_id: str, n: int) -> str:
    """The tag of attempt *n* of job *job_id*: what the backend attaches to the job."""
    return f"runjob:{job_id}:{n}"


class Attempts(Tables):
    """The Store's methods on the attempts and pending_actions tables."""

    def begin_attempt(self, job_id: str, *, resumed_from: str | None = None, n: int | None = None) -> AttemptRow:
        """Record a new attempt as SUBMITTING with its tag, before anything is submitted.
        *n*: its number when the cluster told it already (an adopted job's attempt)."""
        with self.transaction():
            if n is None:
                n = self._db.execute("SELECT COALESCE(MAX(n), 0) + 1 FROM attempts WHERE job_id = ?", (job_id,)).fetchone()[0]
            tag = attempt_tag(job_id, n)
            self._db.execute(
                "INSERT INTO attempts(job_id, n, tag, state, resumed_from, who) VALUES (?,?,?,?,?,?)",
                (job_id, n, tag, "SUBMITTING", resumed_from, self.who),
            )
            self._db.execute("UPDATE jobs SET state = 'SUBMITTING' WHERE id = ?", (job_id,))
        return self.attempt(job_id, n)

    def begin_first_attempts(self, jobs: list[dict[str, Any]]) -> list[JobRow]:
        """:meth:`create_job` then :meth:`begin_attempt` (n=1) of many new jobs (keyword dicts of
        :meth:`create_job`, ``job_id`` given) in one transaction and two statements, each job
        ``SUBMITTING`` at once: a 1,000-element sweep's elements, where one at a time was 4,000.
        Their rows as written (a read of them back took ~13 ms of such a sweep's submit)."""
        now = time.time()
        rows = [JobRow(id=job["job_id"], name=job["name"], cluster=job["cluster"], backend=job["backend"],
                       spec_json=job["spec_json"], spec_hash=job["spec_hash"], spec_path=job["spec_path"],
                       kind=job.get("kind", "full"), created_at=now, state="SUBMITTING", outcome=None, script=None,
                       who=self.who, sweep_id=job.get("sweep_id"), sweep_index=job.get("sweep_index")) for job in jobs]
        with self.transaction():
            self._db.executemany(
                "INSERT INTO jobs(id, name, cluster, backend, spec_json, spec_hash, spec_path, kind, created_at, state,"
                " who, sweep_id, sweep_index) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(r.id, r.name, r.cluster, r.backend, r.spec_json, r.spec_hash, r.spec_path, r.kind, r.created_at, r.state,
                  r.who, r.sweep_id, r.sweep_index) for r in rows])
            self._db.executemany(
                "INSERT INTO attempts(job_id, n, tag, state, resumed_from, who) VALUES (?,?,?,?,?,?)",
                [(r.id, 1, attempt_tag(r.id, 1), "SUBMITTING", None, self.who) for r in rows])
        return rows

    def record_submissions(self, submissions: list[tuple[str, int, str, str, float]],
                           scripts: dict[str, str] | None = None) -> None:
        """:meth:`record_submission` of many (job id, n, submission JSON, backend job id,
        submitted at) in one transaction and two statements; with *scripts* (job id -> its
        script), each job's script is set by the same statement as its state (a job row whose
        script was set before is written whole again by the state's update: a 1,000-element
        array wrote its ~4 MB of scripts twice)."""
        with self.transaction():
            self._db.executemany(
                "UPDATE attempts SET state = 'PENDING', backend_job_id = ?, submission_json = ?, submitted_at = ?"
                " WHERE job_id = ? AND n = ?",
                [(backend_job_id, submission_json, submitted_at, job_id, n)
                 for job_id, n, submission_json, backend_job_id, submitted_at in submissions])
            self._db.executemany("UPDATE jobs SET state = 'PENDING', script = COALESCE(?, script) WHERE id = ?",
                                 [((scripts or {}).get(s[0]), s[0]) for s in submissions])

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
        with self.transaction():
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
        return _rows.to_record(AttemptRow, row)

    def attempts(self, job_id: str) -> list[AttemptRow]:
        rows = self._db.execute("SELECT * FROM attempts WHERE job_id = ? ORDER BY n", (job_id,))
        return _rows.to_records(AttemptRow, rows)

    def attempts_of(self, job_ids: list[str]) -> dict[str, list[AttemptRow]]:
        """The attempts of each of *job_ids* (in order of ``n``), in one query whatever their
        number: ``runjob status`` lists 20 jobs with one, not 20, and 10,000 with one, not 20."""
        found: dict[str, list[AttemptRow]] = {job_id: [] for job_id in job_ids}
        among, params = self._db.among(list(found))
        for row in _rows.to_records(AttemptRow, self._db.execute(f"SELECT * FROM attempts WHERE job_id {among} ORDER BY job_id, n",
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
        return _rows.to_record(AttemptRow, row) if row else None

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
        return _rows.to_record(AttemptRow, row) if row else None

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
        return None if collected else _rows.to_record(AttemptRow, row)

    # ------------------------------------------------------------------ follow-ups of ended attempts

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
        return _rows.to_record(AttemptRow, row) if row else None

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
        return _rows.to_records(AttemptRow, rows)

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
        return _rows.to_records(AttemptRow, rows)
