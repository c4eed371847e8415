"""runjob state migrate (issue 27, item 5): a folder's SQLite state copied into a PostgreSQL state
that other members already write to, compared row by row; a second run copies nothing."""

from __future__ import annotations

import json

import psycopg

from runjob_core.store import Store
from runjob_core.testing import run_cli as runjob

#: Every table a state remembers, with the columns compared (ids of events and artifacts apart:
#: they are kept only where the target has not given them to another row).
TABLES = {"jobs": "id", "sweeps": "id", "attempts": "job_id, n", "log_offsets": "job_id, attempt, stream",
          "pending_actions": "job_id, n", "events": "id", "artifacts": "id",
          "metrics": "job_id, attempt, series, step"}


def _fill(store: Store, name: str) -> list[str]:
    jobs = []
    store.create_sweep(sweep_id=f"sw-{name}", name=f"grid-{name}", spec_hash="s", spec_json="{}",
                       elements_json="[]", max_parallel=2)
    for i in range(3):
        job = store.create_job(name=f"{name}-{i}", cluster="local", backend="local", spec_json='{"a": 1}',
                               spec_hash=f"h{i}", spec_path="job.yaml", sweep_id=f"sw-{name}", sweep_index=i)
        store.begin_attempt(job)
        store.record_submission(job, 1, '{"x": 1}', f"local-{i}", 100.5 + i)
        store.update_attempt(job, 1, state="FAILED", exit_code=75, step=10 * i, machine_json=None)
        store.begin_attempt(job, resumed_from="/ckpt/10")
        store.update_attempt(job, 2, state="COMPLETED", exit_code=0, ended_at=200.25)
        store.set_job(job, outcome=f"done {i}")
        store.add_event(job, "state", f"attempt 1 of {name}-{i}", attempt=1, data={"i": i})
        store.add_event(job, "collected", "collected into results", attempt=2)
        store.set_offset(job, 2, 1234 + i)
        store.add_artifact(job, attempt=2, name="results", kind="results", location=f"results/{name}-{i}",
                           source="runjob-local", rows=7, data={"files": ["out.jsonl"]})
        store.add_metrics(job, 2, [("loss", float(s), 1000.0 + s, 1.0 / (s + 1)) for s in range(50)], source="t")
        jobs.append(job)
    store.mark_pending(jobs[0], 1)
    store.add_event(None, "note", f"a note of {name}'s folder")
    return jobs


def _rows(read, table: str, columns: list[str]) -> list[dict]:
    return [dict(zip(columns, row)) for row in read(f"SELECT {', '.join(chr(34) + c + chr(34) for c in columns)} "
                                                     f"FROM {table}")]


def test_a_sqlite_state_is_copied_into_a_shared_one_without_loss_and_once(pg_url, runjob_home):
    local = Store(runjob_home / ".runjob" / "state.db")
    mine = _fill(local, "mine")
    theirs = Store(pg_url)  # a colleague's jobs are there already: their event ids 1.. are taken
    _fill(theirs, "theirs")
    before = {t: theirs._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    theirs.close()

    done = runjob("state", "migrate", "--to", pg_url, "--json", cwd=runjob_home)
    assert done.returncode == 0, done.stderr
    copied = json.loads(done.stdout)["copied"]
    assert copied == {"jobs": 3, "sweeps": 1, "attempts": 6, "log_offsets": 3, "pending_actions": 1, "events": 7,
                      "artifacts": 3, "metrics": 150}

    shared = psycopg.connect(pg_url)
    for table in TABLES:
        columns = [c for c in local._db.columns(table) if c != "id" or table not in ("events", "artifacts")]
        source = _rows(lambda q: local._db.execute(q).fetchall(), table, columns)
        target = _rows(lambda q: shared.execute(q).fetchall(), table, columns)
        missing = [row for row in source if row not in target]
        assert not missing, (table, missing[:3])
        assert len(target) == before[table] + len(source), table  # nothing else added, nothing doubled
    # Job ids and the ids of events the target had not given away are kept.
    assert {r[0] for r in shared.execute("SELECT id FROM jobs")} >= set(mine)
    assert shared.execute("SELECT who FROM jobs WHERE id = %s", (mine[0],)).fetchone()[0] == local.who

    again = runjob("state", "migrate", "--to", pg_url, "--json", cwd=runjob_home)
    assert again.returncode == 0, again.stderr
    assert set(json.loads(again.stdout)["copied"].values()) == {0}
    # The shared state goes on: a new event gets an id past every copied one.
    store = Store(pg_url)
    event = store.add_event(mine[0], "note", "after the move")
    assert event.id == shared.execute("SELECT MAX(id) FROM events").fetchone()[0]
    assert [e.message for e in store.events(mine[0])][-1] == "after the move"
    store.close()
    shared.close()
    local.close()


def test_migrate_without_a_target_or_onto_itself_is_one_line(runjob_home):
    from runjob_core.testing import one_line_error

    Store(runjob_home / ".runjob" / "state.db").close()
    assert "needs a target: --to postgresql://" in one_line_error(runjob("state", "migrate", cwd=runjob_home))
    where = runjob("state", "where", cwd=runjob_home)
    assert where.returncode == 0 and where.stdout.startswith(f"sqlite://{(runjob_home / '.runjob' / 'state.db').resolve()}")
    url = "postgresql://alice:s3cret@db.lab:5432/lab"
    shown = runjob("state", "where", cwd=runjob_home, env={"RUNJOB_STATE_URL": url}).stdout
    assert shown.strip() == "postgresql://alice@db.lab:5432/lab"
    same = f"sqlite://{runjob_home / '.runjob' / 'state.db'}"
    assert "are the same state" in one_line_error(runjob("state", "migrate", "--to", same, cwd=runjob_home))
