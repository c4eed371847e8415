"""What a job's attempts left behind: the artifacts collect recorded, and the metrics history
(loss, reward, ... per attempt and step) that the report and the dashboard draw."""

from __future__ import annotations

import json
import time
from typing import Any

from runjob_core.redact import redact
from runjob_core.store import rows as _rows
from runjob_core.store.rows import ArtifactRow
from runjob_core.store.tables import Tables

#: Points kept per job, attempt and metric series: past this, every other point is dropped
#: (first and last kept), so a long run keeps its shape in a bounded table.
MAX_METRIC_POINTS = 4000


class Outputs(Tables):
    """The Store's methods on the artifacts and metrics tables."""

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
        with self.transaction():
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

    def metrics(self, job_id: str, *, series: tuple[str, ...] = ()) -> list[tuple[int, str, float | None, float | None, float]]:
        """(attempt, series, step, ts, value) of a job (only *series* if given), by series, attempt and step."""
        where = f" AND series IN ({','.join('?' * len(series))})" if series else ""
        cursor = self._db.execute("SELECT attempt, series, step, ts, value FROM metrics WHERE job_id = ?" + where +
                                  " ORDER BY series, attempt, step, ts", (job_id, *series))
        _rows.plain_rows(cursor)  # plain tuples: a dashboard reads a hundred thousand of them
        return cursor.fetchall()

    def metrics_of(self, job_ids: list[str], *, series: tuple[str, ...] = ()) -> dict[str, list[tuple]]:
        """:meth:`metrics` of many jobs (job id -> its points), one query whatever their number."""
        found: dict[str, list[tuple]] = {}
        among, params = self._db.among(list(dict.fromkeys(job_ids)))
        where = f" AND series IN ({','.join('?' * len(series))})" if series else ""
        # In the index's order (job first): no sort of every point, and each job's points come together.
        cursor = self._db.execute(f"SELECT job_id, attempt, series, step, ts, value FROM metrics WHERE job_id {among}{where}"
                                  " ORDER BY job_id, series, attempt, step, ts", (*params, *series))
        _rows.plain_rows(cursor)
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
