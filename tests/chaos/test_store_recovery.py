"""A damaged state store (issue 34 item 5), through the real `runjob` command: the store that
replaces it keeps every job and attempt that can still be read, and a command holding the old
file open (a running watch) notices that it was set aside instead of writing into it."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core.store import Store
from runjob_core.store.faults import StoreCorruptError
from runjob_core.testing import run_cli, wait_until

pytestmark = [pytest.mark.chaos]
RUNJOB = str(Path(sys.executable).parent / "runjob")


def damage_table(db: Path, table: str) -> None:
    """Overwrite the root page of *table* with garbage, as a bad disk block would."""
    con = sqlite3.connect(db)
    root, page_size = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0], \
        con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    with open(db, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xa5" * page_size)


def test_a_damaged_store_is_replaced_by_one_that_keeps_what_can_be_read(runjob_home):
    for name in ("one", "two", "three"):
        (runjob_home / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, "command": f"echo {name}"}))
        run_cli("run", f"{name}.yaml", "--yes", cwd=runjob_home)
    before = json.loads(run_cli("status", "--json", cwd=runjob_home).stdout)
    damage_table(runjob_home / ".runjob" / "state.db", "events")
    damaged = run_cli("events", "one", cwd=runjob_home)
    assert damaged.returncode == 1 and "kept aside" in damaged.stderr and "Traceback" not in damaged.stderr
    after = json.loads(run_cli("status", "--json", cwd=runjob_home).stdout)
    assert [(j["id"], j["state"]) for j in after] == [(j["id"], j["state"]) for j in before]
    assert [len(j["attempts"]) for j in after] == [1, 1, 1]
    (recovered,) = [e for e in json.loads(run_cli("events", "--json", cwd=runjob_home).stdout) if e["kind"] == "store_recovered"]
    assert "3 jobs" in recovered["message"] and "3 attempts" in recovered["message"]


def test_a_store_set_aside_under_a_running_command_is_noticed(runjob_home):
    db = runjob_home / ".runjob" / "state.db"
    holder = Store(db)  # as a running watch holds it
    try:
        holder.generation()
        db.rename(db.with_name("state.db.corrupt-test"))  # what another command does on finding it damaged
        Store(db).close()
        with pytest.raises(StoreCorruptError, match="was set aside"):
            holder.generation()
    finally:
        holder.close()


def test_a_running_watch_stops_with_one_line_when_the_store_is_set_aside(runjob_home):
    (runjob_home / "long.yaml").write_text(yaml.safe_dump({"name": "long", "command": "sleep 600"}))
    run_cli("submit", "long.yaml", "--yes", cwd=runjob_home)
    watch = subprocess.Popen([RUNJOB, "watch", "long", "--interval", "0.2", "--max-interval", "0.5"], cwd=runjob_home,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        db = runjob_home / ".runjob" / "state.db"
        wait_until(lambda: any(e["kind"] == "state" for e in json.loads(run_cli("events", "long", "--json", cwd=runjob_home).stdout)),
                   timeout=60)
        db.rename(db.with_name("state.db.corrupt-test"))
        out, err = watch.communicate(timeout=120)
    finally:
        if watch.poll() is None:
            watch.kill()
        run_cli("cancel", "long", cwd=runjob_home)
    assert watch.returncode == 1 and "was set aside" in err and "Traceback" not in err, err[-2000:]
