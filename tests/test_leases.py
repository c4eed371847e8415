"""The store's leases (runjob_core.store.leases): one holder at a time across processes; a holder
that died frees its lease at once, one on another host when it expires. On both backends (the
``state`` fixture): SQLite's one-writer transactions and PostgreSQL's row locks."""

import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from runjob_core.errors import RunjobError
from runjob_core.store import Store


def _open(kind, url):
    from pathlib import Path

    return Store(url if kind == "postgresql" else Path(url.removeprefix("sqlite://")))


def _bump(kind, url, key, rounds):
    store = _open(kind, url)
    for _ in range(rounds):
        with store.claim(key):
            # Read, pause, write: without the lease, processes overwrite each other's counts.
            value = int(store._db.execute("SELECT value FROM meta WHERE key = 'counter'").fetchone()[0])
            time.sleep(0.002)
            store._db.execute("UPDATE meta SET value = ? WHERE key = 'counter'", (str(value + 1),))
    store.close()


def test_one_holder_at_a_time_across_processes(state):
    store = state.open()
    store._db.execute("INSERT INTO meta(key, value) VALUES ('counter', '0')")
    workers = [multiprocessing.get_context("spawn").Process(target=_bump, args=(state.kind, state.url, "submit:rj-x", 20))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * 4
    assert store._db.execute("SELECT value FROM meta WHERE key = 'counter'").fetchone()[0] == "80"


def test_a_lease_of_a_dead_process_is_free_at_once(state):
    state.open()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from runjob_core.store import Store\n"
        "s = Store.open_default(); assert s.try_lease('observe:rj-x') is None; print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, **state.env})
    assert holder.stdout.readline().strip() == "held"
    store = state.open()
    assert store.try_lease("observe:rj-x") is not None  # alive: it keeps it
    with pytest.raises(RunjobError, match="another runjob process"):
        with store.claim("observe:rj-x", wait=0.2):
            pass
    holder.kill()
    holder.wait()
    assert store.try_lease("observe:rj-x") is None  # gone: taken over without waiting for expiry


def test_a_lease_of_another_host_is_free_when_it_expires(state):
    store = state.open()
    store._db.execute("INSERT INTO leases(key, owner, expires_at) VALUES ('submit:rj-y', 'elsewhere:1:1:ab', ?)",
                      (time.time() + 0.3,))
    assert store.try_lease("submit:rj-y") == "elsewhere:1:1:ab"
    time.sleep(0.4)
    assert store.try_lease("submit:rj-y") is None
