"""The sweeps table (state schema 6): recorded once, found by id, name or spec hash; a schema-5
database gains it and keeps its jobs."""

import sqlite3

from runjob_core.store import SCHEMA_VERSION, Store


def _job(store, name, **sweep):
    return store.create_job(name=name, cluster="local", backend="local", spec_json="{}", spec_hash="h",
                            spec_path=None, **sweep)


def test_a_sweep_is_found_by_id_name_and_spec_hash_with_its_jobs_by_index(state):
    store = state.open()  # SQLite and PostgreSQL (tests/conftest.py)
    try:
        for sweep_id, spec_hash in (("sw-1", "aaa"), ("sw-2", "bbb")):
            store.create_sweep(sweep_id=sweep_id, name="grid", spec_hash=spec_hash, spec_json="{}",
                               elements_json='[{"index": 0, "name": "a"}]', max_parallel=2)
        assert store.find_sweep("grid").id == "sw-2"  # the latest by name
        assert store.find_sweep("grid", spec_hash="aaa").id == "sw-1"
        assert store.find_sweep("sw-1").elements == [{"index": 0, "name": "a"}]
        assert store.find_sweep("nope") is None and store.find_sweep("grid", spec_hash="ccc") is None
        second = _job(store, "grid-b", sweep_id="sw-1", sweep_index=1)
        first = _job(store, "grid-a", sweep_id="sw-1", sweep_index=0)
        _job(store, "alone")
        assert [(j.id, j.sweep_index) for j in store.sweep_jobs("sw-1")] == [(first, 0), (second, 1)]
        again = _job(store, "grid-a", sweep_id="sw-1", sweep_index=0)  # a later job of element 0
        store.create_job(name="grid-a", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None,
                         kind="canary", sweep_id="sw-1", sweep_index=0)
        store.set_job(second, outcome="exit 1")
        from runjob_core.sweep import _run

        # The element table's light read picks what element_jobs picks: each index's latest full job.
        latest = {i: (j.id, j.state, j.outcome) for i, j in _run.element_jobs(store, "sw-1").items()}
        assert store.sweep_job_states("sw-1") == latest
        assert latest[0][0] == again and latest[1] == (second, "NEW", "exit 1")
        store.set_sweep_state("sw-1", "cancelled")
        assert store.find_sweep("sw-1").state == "cancelled"
        assert store.find_job("alone").sweep_id is None
    finally:
        store.close()


def test_a_schema_5_database_gains_the_sweeps_table_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "state.db"
    old = Store(path)
    job = _job(old, "exp")
    old._db.execute("DROP TABLE sweeps")
    old._db.execute("DROP INDEX jobs_sweep")
    for column in ("sweep_id", "sweep_index"):
        old._db.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    old._db.execute("PRAGMA user_version = 5")
    old.close()
    reopened = Store(path)
    try:
        row = reopened.get_job(job)
        assert (row.name, row.sweep_id, row.sweep_index) == ("exp", None, None)
        reopened.create_sweep(sweep_id="sw-1", name="g", spec_hash="h", spec_json="{}", elements_json="[]", max_parallel=1)
        reopened.set_job(job, sweep_id="sw-1", sweep_index=0)
        assert [j.id for j in reopened.sweep_jobs("sw-1")] == [job]
    finally:
        reopened.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 6
    db.close()
