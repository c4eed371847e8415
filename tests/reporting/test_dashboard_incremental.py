"""A dashboard rebuild (the sync after every collect) builds again only the jobs that changed."""

from __future__ import annotations

import sys
from pathlib import Path

from runjob_core.models import ClusterConfig
from runjob_core.reporting import dashboard
from runjob_core.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_dashboard import fill  # noqa: E402


def _counting(monkeypatch) -> list[str]:
    built: list[str] = []
    real = dashboard.build_report
    monkeypatch.setattr(dashboard, "build_report", lambda store, row, **kw: built.append(row.id) or real(store, row, **kw))
    return built


def test_a_new_builder_rebuilds_only_the_job_that_changed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state.db")
    ids = fill(store, 12, 120, 600)
    out = tmp_path / "site"
    built = _counting(monkeypatch)
    first = dashboard.Builder(store, out).build()
    assert first["rebuilt"] == 12 and sorted(built) == sorted(ids)
    index = (out / "index.html").read_text()

    built.clear()
    again = dashboard.Builder(store, out).build()  # as a collect runs it: a new builder, the same folder
    assert again["rebuilt"] == 0 and built == []
    assert (out / "index.html").read_text().split("</nav>")[1] == index.split("</nav>")[1]  # same jobs, same rows

    store.add_event(ids[3], "collected", "results downloaded", attempt=1)
    store.update_attempt(ids[5], 1, rows_done=77)  # an attempt row changed in place counts too
    built.clear()
    third = dashboard.Builder(store, out).build()
    assert third["rebuilt"] == 2 and sorted(built) == sorted([ids[3], ids[5]])
    assert "results downloaded" in (out / dashboard.page_name(ids[3])).read_text()


def test_running_jobs_missing_pages_and_other_clusters_are_always_rebuilt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state.db")
    ids = fill(store, 6, 60, 300)
    from runjob_core import config

    spec = config.job_to_json(config.job_from_mapping({"name": "live", "command": "true"}, source="live.yaml", base_dir="."))
    running = store.create_job(name="live", cluster="c", backend="local", spec_json=spec, spec_hash="h", spec_path=None)
    store.begin_attempt(running)
    store.record_submission(running, 1, "{}", "local-1", 1.0)
    store.update_attempt(running, 1, state="RUNNING", started_at=1.0)
    out = tmp_path / "site"
    dashboard.Builder(store, out).build()
    built = _counting(monkeypatch)

    (out / dashboard.page_name(ids[0])).unlink()
    dashboard.Builder(store, out).build()
    assert sorted(built) == sorted([ids[0], running])  # a page that is gone, a job still running

    built.clear()
    other = {"c": ClusterConfig(name="c", type="local", scratch_path="/elsewhere")}  # prices, GPU types: new reports
    assert dashboard.Builder(store, out, clusters=other).build()["rebuilt"] == 7
