"""The state store: jobs, attempts, events, offsets, artifacts; tokens never stored.

One suite for both backends: the ``state`` fixture (tests/conftest.py) is a SQLite file or a
PostgreSQL schema of the test server's; tests of SQLite files from older runjobs stay SQLite's.
"""

import time
from pathlib import Path
import pytest

from runjob_core.errors import JobNotFoundError
from runjob_core import store as store_module
from runjob_core.store import Store


@pytest.fixture
def store(state):
    return state.open()


def make_job(store, name="exp"):
    return store.create_job(name=name, cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)


def test_find_by_id_or_latest_name(store):
    first = make_job(store)
    second = make_job(store)
    assert store.find_job(first).id == first
    assert store.find_job("exp").id == second
    with pytest.raises(JobNotFoundError, match="recent jobs: exp"):
        store.find_job("nope")


def test_attempt_lifecycle_and_tags(store):
    job = make_job(store)
    one = store.begin_attempt(job)
    assert (one.n, one.state, one.tag) == (1, "SUBMITTING", f"runjob:{job}:1")
    store.record_submission(job, 1, '{"x": 1}', "42", 1.0)
    store.update_attempt(job, 1, state="TIMEOUT", rows_done=10)
    two = store.begin_attempt(job, resumed_from="/ckpt/step-10")
    assert two.n == 2 and store.get_job(job).state == "SUBMITTING"
    assert [a.n for a in store.active_attempts()] == [2]
    assert store.active_attempts([]) == [] and [a.n for a in store.active_attempts([job])] == [2]  # none asked: none
    store.update_attempt(job, 1, state="FAILED")  # an old attempt does not change the job's state
    assert store.get_job(job).state == "SUBMITTING"


def test_refused_attempt_is_forgotten(store):
    job = make_job(store)
    store.begin_attempt(job)
    store.delete_attempt(job, 1)
    assert store.attempts(job) == []


def test_events_offsets_artifacts(store):
    job = make_job(store)
    store.add_event(job, "state", "RUNNING", data={"state": "RUNNING"})
    store.add_event(None, "note", "global")
    assert [e.message for e in store.events(job)] == ["RUNNING"]
    assert len(store.events()) == 2
    store.set_offset(job, 1, 100)
    store.set_offset(job, 1, 250)
    assert store.offset(job, 1) == 250 and store.offset(job, 2) == 0
    store.add_artifact(job, attempt=1, name="results", kind="results", location="results/exp", source="t", rows=3)
    assert store.artifacts(job)[0].rows == 3


def test_events_written_many_at_once_come_back_with_the_ids_they_were_stored_under(store, monkeypatch):
    """A sweep writes its elements' events in batches of 500 statements' rows: each returned
    row (shown to the user, the JSON event stream) is the stored one, id included."""
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue1234567890")
    job = make_job(store)
    store.add_event(job, "before", "one at a time")
    batch = [(job if i % 3 else None, f"k{i % 7}", f"message {i}", "test", i % 4 or None, {"i": i} if i % 2 else None)
             for i in range(1203)]  # three statements: 500 + 500 + 203
    batch[5] = (job, "secret", "pushed with hf_supersecretvalue1234567890", "test", 1, {"t": "hf_supersecretvalue1234567890"})
    made = store.add_events(batch)
    stored = {event.id: event for event in store.events(after_id=0)}
    assert len(made) == 1203 and len(stored) == 1204
    assert [stored[event.id] for event in made] == made  # same id, kind, message, data, who
    assert [(e.job_id, e.kind, e.source, e.attempt) for e in made] == [(b[0], b[1], b[3], b[4]) for b in batch]
    assert [e.data for e in made[:4]] == [{}, {"i": 1}, {}, {"i": 3}]
    assert [e.id for e in made] == sorted(e.id for e in made)
    assert "hf_supersecret" not in made[5].message + str(made[5].data)
    assert store.add_events([]) == []


def test_jobs_begun_in_one_batch_are_recorded_as_one_at_a_time(store):
    """A sweep's fresh elements: job rows and first attempts in two statements, their
    submissions (with their scripts) in two, equal to create_job + begin_attempt + set_job + record_submission."""
    single = make_job(store, name="one")
    store.begin_attempt(single)
    fields = [{"job_id": f"rj-batch{i}", "name": f"el-{i}", "cluster": "local", "backend": "local", "spec_json": "{}",
               "spec_hash": "h", "spec_path": None, "sweep_id": None, "sweep_index": i} for i in range(3)]
    store.begin_first_attempts(fields)
    for i in range(3):
        job, attempt = store.get_job(f"rj-batch{i}"), store.latest_attempt(f"rj-batch{i}")
        assert (job.state, job.name, job.sweep_index, job.kind) == ("SUBMITTING", f"el-{i}", i, "full")
        assert (attempt.n, attempt.state, attempt.tag) == (1, "SUBMITTING", f"runjob:rj-batch{i}:1")
        assert attempt.who == store.attempt(single, 1).who
    assert store.jobs_with_attempts(["rj-batch0", "rj-batch2", make_job(store, name="none"), "rj-nope"]) == {
        "rj-batch0", "rj-batch2"}
    store.record_submissions([("rj-batch0", 1, '{"x": 0}', "7_0", 1.0), ("rj-batch1", 1, '{"x": 1}', "7_1", 2.0)],
                             scripts={"rj-batch0": "#!/bin/bash\necho 0\n", "rj-batch1": "echo 1"})
    assert [(a.state, a.backend_job_id, a.submission_json) for a in (store.attempt("rj-batch0", 1), store.attempt("rj-batch1", 1))] \
        == [("PENDING", "7_0", '{"x": 0}'), ("PENDING", "7_1", '{"x": 1}')]
    assert [store.get_job(f"rj-batch{i}").state for i in range(3)] == ["PENDING", "PENDING", "SUBMITTING"]
    assert [store.get_job(f"rj-batch{i}").script for i in range(3)] == ["#!/bin/bash\necho 0\n", "echo 1", None]


def test_tokens_never_reach_the_database(store, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue1234567890")
    job = make_job(store)
    store.add_event(job, "x", "pushing with hf_supersecretvalue1234567890 and hf_abcdefghijklmnopqrstuvwx",
                    data={"token": "hf_supersecretvalue1234567890"})
    if store.shared:
        raw = "".join(str(row) for table in ("jobs", "events") for row in store._db.execute(f"SELECT * FROM {table}"))
        raw = raw.encode()
    else:
        raw = (store.path).read_bytes() + b"".join(p.read_bytes() for p in store.path.parent.glob("state.db-*"))
    assert b"supersecret" not in raw and b"hf_abcdefghij" not in raw


def test_two_processes_share_the_store(state):
    a, b = state.open(), state.open()
    job = make_job(a)
    assert b.get_job(job).name == "exp"
    before = b.generation()
    a.begin_attempt(job)
    assert b.generation() != before  # b's caches (the monitor's memo) see a's commit
    before = b.generation()
    a.set_job(job, outcome="done")
    assert b.generation() != before
    a.add_event(job, "note", "from a")
    assert [e.message for e in b.events(job)] == ["from a"]


def test_a_database_with_columns_from_a_newer_runjob_still_reads(state):
    store = state.open()
    job = make_job(store)
    store.begin_attempt(job)
    # A later version adds columns (ALTER TABLE appends them); this version ignores them.
    store._db.execute("ALTER TABLE jobs ADD COLUMN priority INTEGER DEFAULT 7")
    store._db.execute("ALTER TABLE attempts ADD COLUMN gpu_hours REAL")
    store.close()
    reopened = state.open()
    try:
        assert reopened.get_job(job).name == "exp"
        assert [j.id for j in reopened.list_jobs()] == [job]
        assert reopened.job_heads([job])[job].name == "exp"
        assert [a.n for a in reopened.active_attempts([job])] == [1]
    finally:
        reopened.close()


# ----------------------------------------------------------------------------- schema versions


def user_version(path) -> int:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def stored_version(state) -> int:
    """The schema version written in the state, read without runjob."""
    if state.kind == "sqlite":
        return user_version(state.url.removeprefix("sqlite://"))
    import psycopg

    with psycopg.connect(state.url) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])


def test_a_new_database_records_its_schema(state):
    from runjob_core import store as store_module

    store = state.open()
    assert store._db.schema_version() == store_module.SCHEMA_VERSION
    assert store._db.execute("SELECT value FROM meta WHERE key = 'oldest_compatible'").fetchone()[0] == "1"
    assert {"jobs", "attempts", "events", "metrics", "leases", "pending_actions", "artifacts", "log_offsets"} <= {
        t for t in ("jobs", "attempts", "events", "metrics", "leases", "pending_actions", "artifacts", "log_offsets")
        if store._db.has_table(t)}


def test_a_database_from_before_schema_versions_is_upgraded_with_its_rows(tmp_path):
    path = tmp_path / "state.db"
    old = Store(path)
    job = make_job(old)
    old.begin_attempt(job)
    old._db.execute("DROP TABLE meta")
    for column in ("machine_json", "released_at"):  # the layout of then (version 1's)
        old._db.execute(f"ALTER TABLE attempts DROP COLUMN {column}")
    for table in ("jobs", "attempts", "events"):
        old._db.execute(f"ALTER TABLE {table} DROP COLUMN who")
    old._db.execute("PRAGMA user_version = 0")  # as written before versions were kept
    old.close()
    reopened = Store(path)
    try:
        assert reopened.get_job(job).name == "exp"
        assert reopened.attempt(job, 1).machine is None
    finally:
        reopened.close()
    assert user_version(path) == store_module.SCHEMA_VERSION


def test_a_schema_2_database_gains_the_metrics_table_and_keeps_its_rows(tmp_path):
    from runjob_core import store as store_module

    path = tmp_path / "state.db"
    old = Store(path)
    job = make_job(old)
    old._db.execute("DROP TABLE metrics")
    old._db.execute("PRAGMA user_version = 2")  # as the runjob before the metrics history left it
    old.close()
    reopened = Store(path)
    try:
        assert reopened.get_job(job).name == "exp"
        reopened.add_metrics(job, 1, [("loss", 1.0, 0.0, 2.5)], source="test")
        assert reopened.metrics(job) == [(1, "loss", 1.0, 0.0, 2.5)]
    finally:
        reopened.close()
    assert user_version(path) == store_module.SCHEMA_VERSION >= 3


def test_metric_series_are_thinned_past_the_bound_keeping_both_ends(state, monkeypatch):
    from runjob_core.store import outputs

    monkeypatch.setattr(outputs, "MAX_METRIC_POINTS", 10)
    store = state.open()
    job = make_job(store)
    store.add_metrics(job, 1, [("loss", float(s), None, float(s)) for s in range(11)], source="test")
    steps = [p[2] for p in store.metrics(job)]
    assert steps == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]  # 11 > 10: every other point dropped, the last kept
    store.add_metrics(job, 2, [("loss", 11.0, None, 1.0)], source="test")  # another attempt: its own bound
    assert len(store.metrics(job)) == 7
    store.close()


def test_migration_steps_run_once_in_order(state, monkeypatch):
    from runjob_core.store import schema

    first = state.open()
    job = make_job(first)
    first.close()
    current = schema.SCHEMA_VERSION
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    monkeypatch.setattr(schema, "_MIGRATIONS",
                        {**schema._MIGRATIONS, current: ("ALTER TABLE jobs ADD COLUMN priority INTEGER DEFAULT 3",)})
    for _ in range(2):  # the second open finds the new schema and does nothing
        reopened = state.open()
        assert reopened._db.execute("SELECT priority FROM jobs WHERE id = ?", (job,)).fetchone()[0] == 3
        assert reopened.get_job(job).name == "exp"
        assert reopened._db.schema_version() == current + 1
        reopened.close()


NEWER = store_module.SCHEMA_VERSION + 1  # a layout of a runjob newer than this one


@pytest.mark.parametrize("oldest, usable", [(1, True), (NEWER, False)])
def test_a_database_of_a_newer_runjob_is_used_only_if_it_says_so(state, oldest, usable):
    from runjob_core.errors import RunjobError

    newer = state.open()
    job = make_job(newer)
    newer._db.set_schema_version(NEWER)
    newer._db.execute("UPDATE meta SET value = ? WHERE key = 'oldest_compatible'", (str(oldest),))
    newer.close()
    if usable:
        reopened = state.open()
        assert reopened.get_job(job).name == "exp"
    else:
        where = "state.db" if state.kind == "sqlite" else "runjob_test"
        with pytest.raises(RunjobError, match=rf"{where}.* was written by a newer runjob .*upgrade runjob"):
            state.open()
    assert stored_version(state) == NEWER  # never downgraded


def test_a_schema_3_database_gains_the_lease_tables_and_keeps_its_rows(tmp_path):
    from runjob_core import store as store_module

    path = tmp_path / "state.db"
    old = Store(path)
    job = make_job(old)
    old._db.execute("DROP TABLE leases")
    old._db.execute("DROP TABLE pending_actions")
    for table in ("jobs", "attempts", "events"):  # added by schema 5
        old._db.execute(f"ALTER TABLE {table} DROP COLUMN who")
    old._db.execute("PRAGMA user_version = 3")  # as the runjob before one-writer leases left it
    old.close()
    reopened = Store(path)
    try:
        assert reopened.get_job(job).name == "exp"
        with reopened.claim(f"submit:{job}"):
            assert reopened.lease_holder(f"submit:{job}") == reopened.owner
        reopened.mark_pending(job, 1)
        assert reopened.pending_actions() == [(job, 1)]
    finally:
        reopened.close()
    assert user_version(path) == store_module.SCHEMA_VERSION >= 4


def test_an_in_memory_store_leaves_no_file_behind(tmp_path, monkeypatch):
    # offline work (runjob health scan, the reference list) uses Store(":memory:"): making the
    # state private must not create a file named ':memory:' in the working folder
    from runjob_core.store import Store

    monkeypatch.chdir(tmp_path)
    store = Store(Path(":memory:"))
    store.generation()
    store.close()
    assert list(tmp_path.iterdir()) == []


def test_lists_of_ids_of_any_length_in_one_statement(state):
    """attempts_of, events_of, metrics_of, artifacts_of and job_heads take any number of ids (one
    statement: was one per 500), keep each job's rows apart and in order, and read odd ids too."""
    store = state.open()
    ids = []
    with store.transaction():
        for i in range(1203):
            job = store.create_job(job_id=f"rj-many{i:05d}", name=f"exp{i % 7}", cluster="local", backend="local",
                                   spec_json="{}", spec_hash="h", spec_path=None)
            ids.append(job)
            store.begin_attempt(job)
            if i % 100 == 0:
                store.begin_attempt(job)
                store.add_event(job, "note", f"event of {job}")
                store.add_artifact(job, attempt=1, name="r", kind="results", location=f"/r/{job}", source="t")
    for i in range(0, 1203, 100):
        store.add_metrics(ids[i], 1, [("loss", 2.0, None, 0.5), ("loss", 1.0, None, 0.9), ("acc", 1.0, None, 0.1)],
                          source="t")
    statements = []
    if not store.shared:
        store._db.set_trace_callback(statements.append)
    attempts = store.attempts_of(ids)
    assert [len(attempts[job]) for job in ids] == [2 if i % 100 == 0 else 1 for i in range(1203)]
    assert all([a.n for a in attempts[job]] == sorted(a.n for a in attempts[job]) for job in ids)
    assert set(store.job_heads(ids)) == set(ids)
    events = store.events_of(ids)
    assert sorted(events) == ids[::100] and all(e.message == f"event of {job}" for job in events for e in events[job])
    artifacts = store.artifacts_of(ids)
    assert [a.location for a in artifacts[ids[100]]] == [f"/r/{ids[100]}"] and artifacts[ids[1]] == []
    metrics = store.metrics_of(ids)
    assert sorted(metrics) == ids[::100]
    assert metrics[ids[200]] == store.metrics(ids[200]) == [(1, "acc", 1.0, None, 0.1), (1, "loss", 1.0, None, 0.9),
                                                           (1, "loss", 2.0, None, 0.5)]
    if not store.shared:
        assert len(statements) == 6  # one each, whatever the number of ids
        store._db.set_trace_callback(None)
    # An id with a line break, or an empty one, still reads (PostgreSQL splits a joined text otherwise).
    assert store.attempts_of(["rj-no\nsuch", "", ids[0]]) == {"rj-no\nsuch": [], "": [], ids[0]: attempts[ids[0]]}
    assert store.attempts_of([]) == {}


def _open_when_released(path, barrier, answers):
    barrier.wait()
    try:
        Store(path).close()
        answers.put("")
    except Exception as exc:  # the test counts what each process raised
        answers.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_sqlite_state_at_once_all_open_it(tmp_path):
    # Two `runjob run`s in a fresh folder: seen on CI as "database is locked" from
    # PRAGMA journal_mode=WAL, whose lock SQLite does not wait for (22 of 100 tries of 4 here).
    import multiprocessing

    spawn = multiprocessing.get_context("fork")
    errors = []
    for trial in range(40):
        path = tmp_path / f"t{trial}" / "state.db"
        path.parent.mkdir()
        barrier, answers = spawn.Barrier(4), spawn.Queue()
        workers = [spawn.Process(target=_open_when_released, args=(path, barrier, answers)) for _ in range(4)]
        for worker in workers:
            worker.start()
        errors += [answer for answer in (answers.get(timeout=120) for _ in workers) if answer]
        for worker in workers:
            worker.join()
    assert errors == []
    assert Store(tmp_path / "t0" / "state.db")._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_job_ids_made_in_one_second_never_repeat(monkeypatch):
    # A 10,000-element sweep makes its ids in a second or two: with 24 random bits a
    # 1,000-element sweep repeated one 3% of the time (UNIQUE constraint failed: jobs.id).
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.0)
    ids = [store_module.new_job_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    # The same shape as before: SLURM's reattach reads the seconds back from an id.
    assert all(len(i) == 15 and int(i.removeprefix("rj-")[:-6], 36) == 1_800_000_000 for i in ids)


def test_specs_with_jobs_names_the_pairs_that_have_a_job_of_that_kind(state):
    store = state.open()
    store.create_job(name="a", cluster="c", backend="local", spec_json="{}", spec_hash="h1", spec_path=None)
    store.create_job(name="b", cluster="c", backend="local", spec_json="{}", spec_hash="h2", spec_path=None,
                     kind="canary")
    asked = [("a", "h1"), ("a", "h9"), ("b", "h2"), ("c", "h3")]
    assert store.specs_with_jobs(asked, "full") == {("a", "h1")}
    assert store.specs_with_jobs(asked, "canary") == {("b", "h2")}
    assert store.specs_with_jobs([], "full") == set()
    # Leases taken and freed in batches, as a sweep's array submit does: another store sees them held.
    other = state.open()
    assert store.try_leases(["spec:a", "spec:b"]) == {}
    assert set(other.try_leases(["spec:a", "spec:c"])) == {"spec:a"}
    store.release_leases(["spec:a", "spec:b"])
    assert other.try_leases(["spec:a", "spec:b"]) == {}


def test_a_names_latest_canary_is_read_from_an_index_not_from_every_job_of_that_name(tmp_path):
    """Every submit asks for the name's latest canary (issue 29): without an index on the kind,
    SQLite read every job row of that name, spec and script included (~2 ms at 300 jobs)."""
    store = Store(tmp_path / "state.db")
    try:
        full = [store.create_job(name="exp", cluster="local", backend="local", spec_json="{}", spec_hash="h",
                                 spec_path=None) for _ in range(3)]
        canary = store.create_job(name="exp", cluster="local", backend="local", spec_json="{}", spec_hash="h",
                                  spec_path=None, kind="canary")
        store.create_job(name="other", cluster="local", backend="local", spec_json="{}", spec_hash="h",
                         spec_path=None, kind="canary")
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        assert store.latest_canary("exp").id == canary and full
        store._db.set_trace_callback(None)
        [query] = statements
        plan = " ".join(row[3] for row in store._db.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "jobs_kind (name=? AND kind=?)" in plan, plan
        assert "TEMP B-TREE" not in plan  # in created_at order straight from the index
        assert store.latest_canary("nobody") is None
    finally:
        store.close()


def test_a_grown_wal_is_emptied_when_settled_and_a_small_one_is_left_alone(tmp_path, monkeypatch):
    """A warm command's child never closes the store, so nothing checkpoints and removes the
    WAL at exit, and every later process read it all back when it opened the state (~2 ms at
    4 MB, issue 29): the child settles it once its caller has the answer."""
    path = tmp_path / "state.db"
    store = Store(path)
    wal = tmp_path / "state.db-wal"
    try:
        job = make_job(store)
        store.settle_wal()
        assert wal.stat().st_size > 0  # under the bound: left as it is
        monkeypatch.setattr(store_module, "WAL_SETTLE_AT", 0)
        store.settle_wal()
        assert wal.stat().st_size == 0
        assert store.get_job(job).name == "exp"  # checkpointed into the database, nothing lost
        make_job(store, "after")
        assert {row.name for row in Store(path).list_jobs()} == {"exp", "after"}
    finally:
        store.close()

