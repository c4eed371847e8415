"""The state on both backends for tests (issue 27): ``pg_url`` (a PostgreSQL schema of the test
server's, of the test's own) and ``state`` (a SQLite file, then a PostgreSQL schema: one suite for
both). PostgreSQL is skipped only where no test server is configured (``RUNJOB_TEST_PG_URL`` in the
environment or in the test cluster's ``cluster.env``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


def pg_settings() -> dict[str, str] | None:
    """RUNJOB_TEST_PG_URL and RUNJOB_TEST_PGPASSFILE: from the environment, else the test cluster's
    cluster.env (scripts/test-cluster.sh up); None when neither has a PostgreSQL server."""
    import os

    if os.environ.get("RUNJOB_TEST_PG_URL"):
        return {"RUNJOB_TEST_PG_URL": os.environ["RUNJOB_TEST_PG_URL"],
                "RUNJOB_TEST_PGPASSFILE": os.environ.get("RUNJOB_TEST_PGPASSFILE", "")}
    path = os.path.join(os.environ.get("RUNJOB_TEST_DIR", "/var/lib/runjob-test"), "cluster.env")
    try:
        with open(path, encoding="utf-8") as f:
            settings = dict(line.strip().split("=", 1) for line in f if "=" in line)
    except FileNotFoundError:
        return None
    return settings if settings.get("RUNJOB_TEST_PG_URL") else None


class State:
    """One state for a test: a SQLite file, or a PostgreSQL schema of its own in the test database
    (so tests running at once under pytest -n never see each other's tables)."""

    def __init__(self, kind: str, url: str, env: dict[str, str]) -> None:
        self.kind, self.url, self.env = kind, url, env
        self._opened: list = []

    def open(self):
        from pathlib import Path

        from runjob_core.store import Store

        store = Store(self.url if self.kind == "postgresql" else Path(self.url.removeprefix("sqlite://")))
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.close()


@contextlib.contextmanager
def pg_schema(prefix: str = "t_") -> Iterator[str]:
    """A PostgreSQL URL of the test server whose search_path is a fresh schema of its own
    (dropped on leaving): the one setup of the tests' ``pg_url`` and of ``bench/bench_team.py``.
    Sets ``PGPASSFILE`` (the test server's passfile) and takes ``PGPASSWORD`` away, in this
    process's environment: libpq reads them at each connection. Raises LookupError where no
    test server is configured."""
    import os
    import secrets
    from urllib.parse import quote

    settings = pg_settings()
    if settings is None:
        raise LookupError("no PostgreSQL test server (RUNJOB_TEST_PG_URL; scripts/test-cluster.sh up)")
    import psycopg  # the test extra installs it

    os.environ.pop("PGPASSWORD", None)
    if settings.get("RUNJOB_TEST_PGPASSFILE"):
        os.environ["PGPASSFILE"] = settings["RUNJOB_TEST_PGPASSFILE"]
    base = settings["RUNJOB_TEST_PG_URL"]
    schema = prefix + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{base}?options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def pg_url(monkeypatch):
    """A PostgreSQL URL whose search_path is a fresh schema of its own (dropped afterwards); the
    test is skipped where no test server is configured."""
    settings = pg_settings()
    if settings is None:
        pytest.skip("no PostgreSQL test server (RUNJOB_TEST_PG_URL; scripts/test-cluster.sh up)")
    # Set through monkeypatch first, so the test's environment is given back afterwards.
    monkeypatch.delenv("PGPASSWORD", raising=False)
    if settings.get("RUNJOB_TEST_PGPASSFILE"):
        monkeypatch.setenv("PGPASSFILE", settings["RUNJOB_TEST_PGPASSFILE"])
    with pg_schema() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request, tmp_path):
    """The state on each backend: ``state.open()`` is a Store on it (another process's view is
    another ``open()``); ``state.env`` is what a ``runjob`` subprocess needs to use it."""
    import os

    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
        env = {"RUNJOB_STATE_URL": url, "PGPASSFILE": os.environ.get("PGPASSFILE", "")}
    else:
        url = f"sqlite://{tmp_path / 'state' / 'state.db'}"
        env = {"RUNJOB_STATE_URL": url}
    target = State(request.param, url, env)
    yield target
    target.close()
