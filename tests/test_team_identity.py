"""Team mode, first part (issue 27): who made each job, attempt and event; the state URL.

Two processes with different RUNJOB_HOST / RUNJOB_USER stand for two members on two hosts
sharing one state; each is a real ``python -m runjob_core`` process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from runjob_core.errors import RunjobError
from runjob_core.store import Store, locator


def _env(tmp_path, user: str, host: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RUNJOB_STATE_URL",)}
    env.update(RUNJOB_HOME=str(tmp_path / ".runjob"), RUNJOB_USER=user, RUNJOB_HOST=host, **extra)
    return env


def _runjob(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runjob_core", *args], env=env, capture_output=True, text=True,
                          check=False)


def _add_job(env, name: str) -> str:
    # Each "host" writes through its own process, as `runjob run` would.
    code = ("from runjob_core import config\n"
            "from runjob_core.store import Store\n"
            f"spec = config.job_from_mapping({{'name': {name!r}, 'command': 'true', 'cluster': 'local'}}, source='j.yaml')\n"
            "s = Store.open_default()\n"
            f"j = s.create_job(name={name!r}, cluster='local', backend='local', spec_json=config.job_to_json(spec),"
            " spec_hash=config.spec_hash(spec), spec_path=None)\n"
            "s.begin_attempt(j)\n"
            "s.add_event(j, 'note', 'made here', attempt=1)\n"
            "print(j)\n"
            "s.close()\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_each_host_is_recorded_on_its_jobs_attempts_and_events(tmp_path):
    alice = _env(tmp_path, "alice", "laptop")
    bob = _env(tmp_path, "bob", "login1")
    a_job = _add_job(alice, "exp-a")
    b_job = _add_job(bob, "exp-b")
    store = Store(tmp_path / ".runjob" / "state.db")
    try:
        assert store.get_job(a_job).who == "alice@laptop" and store.get_job(b_job).who == "bob@login1"
        assert store.attempt(a_job, 1).who == "alice@laptop" and store.attempt(b_job, 1).who == "bob@login1"
        assert [e.who for e in store.events(b_job)] == ["bob@login1"]
    finally:
        store.close()
    events = _runjob(alice, "events", b_job)
    assert events.returncode == 0, events.stderr
    assert "made here  [runjob] bob@login1" in events.stdout
    as_json = json.loads(_runjob(alice, "events", "--json").stdout)
    assert {(e["job_id"], e["who"]) for e in as_json} == {(a_job, "alice@laptop"), (b_job, "bob@login1")}


def test_status_mine_user_and_all(tmp_path):
    alice = _env(tmp_path, "alice", "laptop")
    bob = _env(tmp_path, "bob", "login1")
    a_job = _add_job(alice, "exp-a")
    b_job = _add_job(bob, "exp-b")
    _add_job(_env(tmp_path, "bobby", "login1"), "exp-c")  # a name that starts like bob's is not bob's

    def ids(env, *flags):
        done = _runjob(env, "status", "--no-refresh", "--json", *flags)
        assert done.returncode == 0, done.stderr
        return {row["id"]: row["who"] for row in json.loads(done.stdout)}

    assert ids(alice, "--mine") == {a_job: "alice@laptop"}
    assert ids(alice, "--user", "bob") == {b_job: "bob@login1"}
    assert len(ids(alice, "--all")) == len(ids(alice)) == 3
    both = _runjob(alice, "status", "--no-refresh", "--mine", "--all")
    assert both.returncode == 1 and "give one of --mine, --user NAME and --all" in both.stderr
    assert "Traceback" not in both.stderr


def test_rows_from_before_schema_5_stay_unattributed(tmp_path):
    path = tmp_path / "state.db"
    old = Store(path)
    job = old.create_job(name="old", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    old.add_event(job, "note", "before")
    for table in ("jobs", "attempts", "events"):
        old._db.execute(f"ALTER TABLE {table} DROP COLUMN who")
    old._db.execute("PRAGMA user_version = 4")
    old.close()
    store = Store(path)
    try:
        assert store.get_job(job).who is None and [e.who for e in store.events(job)] == [None]
        store.add_event(job, "note", "after")
        assert store.events(job)[-1].who == store.who
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] >= 5


# ----------------------------------------------------------------------------- the state URL


def test_a_password_in_the_url_never_reaches_a_message():
    url = "postgresql://alice:s3cret@db.lab:5433/runjob?sslmode=require"
    assert locator.display_url(url) == "postgresql://alice@db.lab:5433/runjob?sslmode=require"
    assert locator.display_url("postgresql://db.lab/runjob") == "postgresql://db.lab/runjob"


def test_postgres_url_without_the_driver_is_one_line_naming_the_extra(tmp_path):
    env = _env(tmp_path, "alice", "laptop", RUNJOB_STATE_URL="postgresql://alice:s3cret@db.lab:5433/runjob")
    # The driver hidden for this process only: a meta-path finder that refuses psycopg.
    code = ("import sys\n"
            "class NoPsycopg:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'psycopg' or name.startswith('psycopg.'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, NoPsycopg())\n"
            "sys.argv = ['runjob', 'status', '--no-refresh']\n"
            "from runjob_core.cli import main\n"
            "main()\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1
    assert "pip install 'runjob-core[postgres]'" in done.stderr
    assert "postgresql://alice@db.lab:5433/runjob" in done.stderr


def test_an_unknown_state_url_is_refused_in_one_line(tmp_path):
    done = _runjob(_env(tmp_path, "a", "h", RUNJOB_STATE_URL="mysql://u:pw@db/x"), "status", "--no-refresh")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "pw@" not in done.stderr
    assert "mysql://u@db/x is not a state URL runjob knows" in done.stderr


def test_a_sqlite_url_names_the_state_file(tmp_path):
    target = tmp_path / "elsewhere" / "state.db"
    target.parent.mkdir()
    env = _env(tmp_path, "alice", "laptop", RUNJOB_STATE_URL=f"sqlite://{target}")
    job = _add_job(env, "exp")
    store = Store(target)
    try:
        assert store.get_job(job).who == "alice@laptop"
    finally:
        store.close()
    assert not (tmp_path / ".runjob" / "state.db").exists()
    with pytest.raises(RunjobError, match="names no file"):
        locator.sqlite_path("sqlite://")


# ----------------------------------------------------------------------------- leases across hosts


def _lease_then_die(tmp_path, host: str, key: str) -> str:
    """A process on ``host`` takes ``key`` for an hour and dies without giving it back."""
    code = ("import os\n"
            "from runjob_core.store import Store\n"
            "s = Store.open_default()\n"
            f"assert s.try_lease({key!r}, ttl=3600) is None\n"
            "print(s.owner, flush=True)\n"
            "os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path, "bob", host), capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_a_lease_of_a_dead_process_on_another_host_holds_until_it_expires(tmp_path, monkeypatch):
    dead = _lease_then_die(tmp_path, "hostb", "submit:rj-1")
    assert dead.startswith("hostb:")
    monkeypatch.setenv("RUNJOB_HOST", "hosta")
    store = Store(tmp_path / ".runjob" / "state.db")
    try:
        # Host A cannot see B's processes: the lease stands until its expiry, however dead B is.
        assert store.try_lease("submit:rj-1") == dead
        store._db.execute("UPDATE leases SET expires_at = ? WHERE key = 'submit:rj-1'", (time.time() - 1,))
        assert store.try_lease("submit:rj-1") is None  # expired: host A takes it
        assert store.lease_holder("submit:rj-1") == store.owner and store.owner.startswith("hosta:")
    finally:
        store.close()


def test_a_lease_of_a_dead_process_on_this_host_is_taken_at_once(tmp_path, monkeypatch):
    _lease_then_die(tmp_path, "hosta", "submit:rj-1")
    monkeypatch.setenv("RUNJOB_HOST", "hosta")
    store = Store(tmp_path / ".runjob" / "state.db")
    try:
        assert store.try_lease("submit:rj-1") is None
    finally:
        store.close()


# ----------------------------------------------------------------------------- the test PostgreSQL server


def _pg_settings() -> dict[str, str]:
    """RUNJOB_TEST_PG_URL and RUNJOB_TEST_PGPASSFILE from the test cluster's cluster.env."""
    path = os.path.join(os.environ.get("RUNJOB_TEST_DIR", "/var/lib/runjob-test"), "cluster.env")
    with open(path, encoding="utf-8") as f:
        settings = dict(line.strip().split("=", 1) for line in f if "=" in line)
    assert "RUNJOB_TEST_PG_URL" in settings, f"{path} has no PostgreSQL: run scripts/test-cluster.sh up"
    return settings


def test_the_test_database_takes_its_password_from_the_passfile_only(monkeypatch):
    import psycopg  # the test extra installs it
    settings = _pg_settings()
    url = settings["RUNJOB_TEST_PG_URL"]
    assert locator.display_url(url) == url  # no password in the URL the suite is given
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", settings["RUNJOB_TEST_PGPASSFILE"])
    with psycopg.connect(url, connect_timeout=10) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "runjob_test"
    monkeypatch.setenv("PGPASSFILE", os.devnull)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(url, connect_timeout=10).close()


def test_a_postgres_url_with_a_wrong_password_is_one_line_without_it(tmp_path):
    import psycopg  # noqa: F401  (the test extra installs it: this is the message with the driver present)
    env = _env(tmp_path, "alice", "laptop", RUNJOB_STATE_URL="postgresql://alice:s3cret@127.0.0.1:5433/runjob_test",
               PGPASSFILE=os.devnull)
    done = _runjob(env, "status", "--no-refresh")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "s3cret" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "PostgreSQL at postgresql://alice@127.0.0.1:5433/runjob_test refused the password" in done.stderr


def test_the_state_key_of_a_config_file_chooses_the_state(tmp_path):
    target = tmp_path / "lab" / "state.db"
    target.parent.mkdir()
    env = _env(tmp_path, "alice", "laptop", HOME=str(tmp_path / "home"))
    user_config = tmp_path / "home" / ".config" / "runjob" / "config.yaml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(f"state: sqlite://{target}\n")
    job = _add_job(env, "from-user-config")  # the user's file, when the folder's has no state:
    with _closing(Store(target)) as store:
        assert store.get_job(job).name == "from-user-config"
    folder_config = tmp_path / ".runjob" / "config.yaml"
    folder_config.parent.mkdir(exist_ok=True)
    other = tmp_path / "other.db"
    folder_config.write_text(f"state: sqlite://{other}\n")  # the folder's file wins over the user's
    job = _add_job(env, "from-folder-config")
    with _closing(Store(other)) as store:
        assert store.get_job(job).name == "from-folder-config"
    folder_config.write_text("state: postgresql://alice:s3cret@db.lab:5432/lab\n")
    done = _runjob(env, "status", "--no-refresh")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "s3cret" not in done.stderr
    assert f"{folder_config}: state holds a password; remove it from the URL (postgresql://alice@db.lab:5432/lab)" \
        in done.stderr and "~/.pgpass" in done.stderr
    folder_config.write_text("state: [1, 2\n")
    done = _runjob(env, "status", "--no-refresh")
    assert done.returncode == 1 and f"{folder_config} is not valid YAML" in done.stderr


def _closing(store):
    import contextlib

    return contextlib.closing(store)


def test_the_dashboard_says_who_submitted_each_job(tmp_path):
    """The lab dashboard (issue 27 item 4) has a ``who`` column: the member's user, user@host on
    hover; a job from before runjob recorded it shows "-"."""
    import re

    from runjob_core.reporting import dashboard

    a_job = _add_job(_env(tmp_path, "alice", "laptop"), "exp-a")
    b_job = _add_job(_env(tmp_path, "bob", "login1"), "exp-b")
    store = Store(tmp_path / ".runjob" / "state.db")
    try:
        old = store.create_job(name="exp-old", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
        store._db.execute("UPDATE jobs SET who = NULL WHERE id = ?", (old,))  # as written before schema 5
        dashboard.build(store, tmp_path / "site")
    finally:
        store.close()
    index = (tmp_path / "site" / "index.html").read_text()
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", index).group(1)
    assert re.findall(r">([^<]+)</th>", header)[:3] == ["job", "who", "cluster"]
    cells = {job: re.search(rf'data-job="{job}">.*?<td class="who"([^>]*)>([^<]*)</td>', index).groups()
             for job in (a_job, b_job, old)}
    assert cells[a_job] == (' data-sort="alice@laptop" title="alice@laptop"', "alice")
    assert cells[b_job] == (' data-sort="bob@login1" title="bob@login1"', "bob")
    assert cells[old] == (' data-sort=""', "-")
    assert "submitted by bob@login1" in (tmp_path / "site" / dashboard.page_name(b_job)).read_text()
