"""`runjob status` stays readable at 80 columns: ids and states whole, one line per job."""

from __future__ import annotations

import re

from runjob_core.cli import _plaintable
from runjob_core.testing import run_cli, wait_until


def test_status_at_80_columns_keeps_ids_and_states_whole_on_one_line_per_job(runjob_home):
    names = ["a-rather-long-experiment-name-for-a-sweep-point-0001", "short"]
    for name in names:
        (runjob_home / f"{name}.yaml").write_text(f"name: {name}\ncommand: 'true'\n")
        submitted = run_cli("submit", f"{name}.yaml", "--yes", cwd=runjob_home)
        assert submitted.returncode == 0, submitted.stderr
    wait_until(lambda: "RUNNING" not in run_cli("status", cwd=runjob_home).stdout, what="the jobs to end")

    shown = run_cli("status", cwd=runjob_home, env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), shown.stdout
    assert len(lines) == 3  # the header and one line per job
    for line in lines[1:]:
        assert re.match(r"rj-[0-9a-z]+ ", line) and re.search(r"\b(COMPLETED|FAILED)\b", line), line
    assert "short" in shown.stdout and "a-rather-l…" in shown.stdout  # a name may be cut, an id never

    job = run_cli("status", "short", cwd=runjob_home, env={"COLUMNS": "80"})
    assert all(len(line) <= 80 for line in job.stdout.splitlines()), job.stdout
    assert re.search(r"^1 +local-\d+ +COMPLETED +0 ", job.stdout, re.M), job.stdout


def test_a_piped_table_is_never_cut(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(_plaintable.os, "isatty", lambda fd: False)
    assert _plaintable.terminal_width() is None
    lines = _plaintable.render(["id", "outcome"], [["rj-1", "x" * 300]], width=None)
    assert lines[1].endswith("x" * 300)


def test_narrow_tables_cut_the_cuttable_then_drop_the_least_useful_columns():
    rows = [["rj-tpj2in63b921", "n" * 40, "full", "COMPLETED", "o" * 50]]
    columns = ["id", "name", "kind", "state", "outcome"]
    wide = _plaintable.render(columns, rows, width=None, whole=("id", "state"), drop_order=("kind",))
    assert wide[1].split() == rows[0]
    cut = _plaintable.render(columns, rows, width=60, whole=("id", "state"), drop_order=("kind",))
    assert all(len(line) <= 60 for line in cut)
    assert "rj-tpj2in63b921" in cut[1] and "COMPLETED" in cut[1] and "…" in cut[1] and "full" in cut[1]
    narrow = _plaintable.render(columns, rows, width=50, whole=("id", "state"), drop_order=("kind",))
    assert all(len(line) <= 50 for line in narrow) and "kind" not in narrow[0]
    assert "rj-tpj2in63b921" in narrow[1] and "COMPLETED" in narrow[1]
