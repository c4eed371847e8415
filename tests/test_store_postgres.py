"""What only the PostgreSQL state has (issue 27): its URL, its one-line connection faults, its
schema made once by runjobs opening it at once, leases between hosts. The Store's methods
themselves are tested on both backends by tests/test_store.py and tests/test_leases.py.

Each test gets its own PostgreSQL schema (search_path) in the runjob_test database (the
``pg_url`` fixture of tests/conftest.py), so tests running at once never see each other's tables.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg  # the test extra installs it
import pytest

from runjob_core.errors import RunjobError
from runjob_core.store import Store, postgres

from runjob_core.testing import pg_settings


def _meta(url) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT key, value FROM meta"))


def _settings() -> dict[str, str]:
    settings = pg_settings()
    if settings is None:
        pytest.skip("no PostgreSQL test server (RUNJOB_TEST_PG_URL; scripts/test-cluster.sh up)")
    return settings


def test_runjobs_opening_a_new_database_at_once_create_it_once(pg_url):
    # Real processes, started together: without the lock, two would race on CREATE TABLE.
    code = ("import sys\n"
            "from runjob_core.store import Store\n"
            "Store(sys.argv[1]).close()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url], stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    from runjob_core.store import SCHEMA_VERSION

    assert _meta(pg_url) == {"schema_version": str(SCHEMA_VERSION),
                             "oldest_compatible": "1"}


def test_a_newer_database_is_refused_in_one_line_naming_the_server(pg_url):
    from runjob_core.store import SCHEMA_VERSION

    newer = SCHEMA_VERSION + 1
    Store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = %s", (str(newer),))
    with pytest.raises(RunjobError) as caught:
        Store(pg_url)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("postgresql://runjob_test@")
    assert f"newer runjob (state schema {newer}, usable from schema {newer}; this runjob has" in message
    assert _meta(pg_url)["schema_version"] == str(newer)  # never downgraded


def test_an_unreachable_server_is_one_line_naming_it_without_the_password():
    url = "postgresql://alice:s3cret@127.0.0.1:1/runjob"
    with pytest.raises(RunjobError) as caught:
        Store(url)
    message = str(caught.value)
    assert "\n" not in message and "s3cret" not in message
    assert message.startswith("PostgreSQL at postgresql://alice@127.0.0.1:1/runjob cannot be reached (")


def test_a_wrong_password_is_one_line_saying_where_a_password_goes(monkeypatch):
    settings = _settings()
    monkeypatch.setenv("PGPASSFILE", os.devnull)
    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    with pytest.raises(RunjobError) as caught:
        Store(settings["RUNJOB_TEST_PG_URL"])
    message = str(caught.value)
    assert "\n" not in message and "not-the-password" not in message
    assert "refused the password: set PGPASSWORD, or add a line" in message


def test_statements_are_translated_once_each():
    text, writes = postgres.translate("SELECT * FROM jobs WHERE name = ? AND rn % 2 = 0 ORDER BY rowid")
    assert text == "SELECT * FROM jobs WHERE name = %s AND rn %% 2 = 0 ORDER BY ctid" and not writes
    ddl, _ = postgres.translate("CREATE TABLE t(id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER, x REAL)")
    assert ddl == "CREATE TABLE t(id BIGSERIAL PRIMARY KEY, n BIGINT, x DOUBLE PRECISION)"
    assert postgres.translate("INSERT INTO t(n) VALUES (?)")[1]


# ----------------------------------------------------------------------------- leases across hosts

_TAKER = """
import os, sys, time
from runjob_core.store import Store
url, key, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = Store(url)
while time.time() < start_at:  # every taker starts at once
    time.sleep(0.001)
other = store.try_lease(key, ttl=3600)
print("won" if other is None else "lost", store.owner, flush=True)
os._exit(0)  # dies holding what it took, as a crashed host would
"""


def _takers(url, key, hosts):
    import time

    start_at = repr(time.time() + 3)
    procs = [subprocess.Popen([sys.executable, "-c", _TAKER, url, key, start_at], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "RUNJOB_HOST": host}) for host in hosts]
    outs = [p.communicate()[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs)
    return outs


def test_hosts_taking_one_lease_at_once_give_it_to_one(pg_url):
    store = Store(pg_url)
    try:
        for trial in range(6):
            if trial % 2:  # an expired lease of a gone host is there: the takers race to update its row
                store._db.execute("INSERT INTO leases VALUES (?, 'gone:1:1:x', 0)", (f"submit:rj-{trial}",))
            outs = _takers(pg_url, f"submit:rj-{trial}", [f"host{i}" for i in range(6)])
            assert sorted(o[0] for o in outs) == ["lost"] * 5 + ["won"], (trial, outs)
    finally:
        store.close()


def test_a_lease_of_a_dead_host_holds_until_it_expires_then_is_taken(pg_url, monkeypatch):
    [(result, dead)] = _takers(pg_url, "watch:rj-1", ["hostb"])
    assert result == "won"
    monkeypatch.setenv("RUNJOB_HOST", "hosta")
    store = Store(pg_url)
    try:
        assert store.try_lease("watch:rj-1") == dead  # B cannot be asked: its lease stands
        store._db.execute("UPDATE leases SET expires_at = 0 WHERE key = 'watch:rj-1'")  # its expiry has passed
        assert store.try_lease("watch:rj-1") is None
        assert store.try_lease("watch:rj-1") is None  # renewing one's own
        assert store._db.execute("SELECT owner FROM leases").fetchall() == [(store.owner,)]
    finally:
        store.close()
