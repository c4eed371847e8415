"""The report's numbers on results with known statistics, asserted exactly; score-distribution
findings; the closing line; Markdown that no result text can break."""

import json
from pathlib import Path

import pytest

from runjob_core import config

from runjob_core.collecting import manifest as _results_folder
from runjob_core.reporting import render, results
from runjob_core.reporting.report import build_report
from runjob_core.store import Store

# (id, category, score, output_tokens, finish_reason, response); the last row repeats id 2.
KNOWN = [
    (0, "a", 1, 10, "stop", "r0"), (1, "a", 0, 20, "stop", "r1"), (2, "a", 1, 30, "stop", "r2"),
    (3, "a", 1, 40, "stop", ""), (4, "a", 0, 50, "stop", None), (5, "b", 0.5, 60, "stop", "r5"),
    (6, "b", 0.5, 70, "stop", "r6"), (7, "b", 1, 80, "stop", "r7"), (8, "b", 0, 90, "stop", "r8"),
    (9, "b", 1, 100, "length", "r9"), (2, "b", 1, 100, "length", "r10 | has a pipe\nand ``` a fence"),
]


def known_rows():
    return [{"id": i, "category": c, "score": s, "output_tokens": t, "finish_reason": f, "response": r}
            for i, c, s, t, f, r in KNOWN]


def write_rows(folder: Path, rows) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_job(store, name="exp", kind="full", **spec):
    job = config.job_from_mapping({"name": name, "command": "true", **spec}, source="t.yaml", base_dir=".")
    return store.get_job(store.create_job(name=name, cluster="local", backend="local", spec_json=config.job_to_json(job),
                                          spec_hash=config.spec_hash(job), spec_path="t.yaml", kind=kind))


def test_statistics_are_exact():
    s = results.summarise(known_rows(), max_tokens=100)
    assert s["rows"] == 11
    assert s["score"] == {"rows": 11, "missing": 0, "mean": 0.636364, "median": 1, "min": 0, "max": 1, "zeros": 3,
                          "ones": 6, "histogram": {"edges": [0, 0.333333, 0.666667, 1], "counts": [3, 2, 6]}}
    assert s["score_by_category"] == {"a": {"rows": 5, "mean": 0.6}, "b": {"rows": 6, "mean": 0.666667}}
    tokens = {k: v for k, v in s["tokens"].items() if k != "histogram"}
    assert tokens == {"field": "output_tokens", "approximate": False, "min": 10, "max": 100, "p50": 60, "p90": 100,
                      "p99": 100, "outliers": 0}
    assert s["truncated"] == {"rows": 2, "rate": 0.181818, "rule": "finish_reason == length"}
    assert s["empty"] == {"field": "response", "rows": 2, "rate": 0.181818}
    assert s["duplicate_keys"] == {"field": "id", "rows": 1}


def test_percentiles_are_nearest_rank_and_tokens_fall_back_to_characters():
    ordered = list(range(1, 101))
    assert [results.percentile(ordered, p) for p in (50, 90, 99)] == [50, 90, 99]
    s = results.summarise([{"response": "x" * n} for n in (1, 4, 5, 8, 9)])
    assert s["tokens"]["approximate"] is True and (s["tokens"]["min"], s["tokens"]["max"], s["tokens"]["p50"]) == (1, 3, 2)
    assert "truncated" not in s  # no finish_reason and no token column: truncation cannot be told


def test_samples_are_best_median_worst_truncated_and_empty():
    rows = known_rows()
    picked = results.samples(rows, results.summarise(rows, max_tokens=100), max_tokens=100)
    assert [(p["why"], p["index"]) for p in picked] == [("best", 10), ("median", 0), ("worst", 1), ("truncated", 9),
                                                        ("empty response", 3)]


def test_report_of_known_results(tmp_path):
    store = Store(tmp_path / "state.db")
    row = make_job(store, model={"max_tokens": 100})
    write_rows(tmp_path / "res", known_rows())
    report = build_report(store, row, results_dir=tmp_path / "res")
    labels = {a["label"]: a for a in report["anomalies"]}
    assert labels["truncated"]["count"] == 2 and labels["empty-response"]["count"] == 2
    assert labels["duplicate-keys"]["count"] == 1
    assert report["closing"]["complete"] is False
    assert any("raise model.max_tokens" in s and "18.2%" in s for s in report["next_steps"])
    text = render.markdown(report)
    assert "| score (score) | mean 0.636364, median 1, min 0, max 1 over 11 rows |" in text
    assert "| tokens (output_tokens) | 10..100, p50 60, p90 100, p99 100 |" in text
    assert "r10 \\| has a pipe" not in text.split("## Samples")[0]  # samples are whole, in fences, below
    assert "````json" in text  # the fence is longer than the ``` inside a sample
    json.dumps(report)  # --json: every value serialisable
    store.close()


@pytest.mark.parametrize("scores, label", [([0.5] * 6, "score-all-equal"), ([0] * 9 + [1], "score-mostly-zero")])
def test_score_distribution_problems(tmp_path, scores, label):
    store = Store(tmp_path / "state.db")
    row = make_job(store)
    write_rows(tmp_path / "res", [{"id": i, "score": s, "response": "x"} for i, s in enumerate(scores)])
    report = build_report(store, row, results_dir=tmp_path / "res")
    assert [a["label"] for a in report["anomalies"] if a["kind"] == "scores"] == [label]
    store.close()


def test_a_healthy_binary_score_is_not_flagged(tmp_path):
    store = Store(tmp_path / "state.db")
    row = make_job(store)
    write_rows(tmp_path / "res", [{"id": i, "score": i % 2} for i in range(10)])
    assert not [a for a in build_report(store, row, results_dir=tmp_path / "res")["anomalies"] if a["kind"] == "scores"]
    store.close()


def test_closing_line_only_when_published_validated_and_synced(tmp_path):
    store = Store(tmp_path / "state.db")
    row = make_job(store, upload={"repo": "me/exp"})
    attempt = store.begin_attempt(row.id)
    store.record_submission(row.id, attempt.n, "{}", "local-1", 1.0)
    store.update_attempt(row.id, 1, state="COMPLETED", started_at=1.0, ended_at=2.0)
    for kind, name, data in (("results", "results", {}), ("hub", "me/exp", {"revision": "abc123"}),
                             ("verified", "verify", {}), ("validation", "validation", {"ok": True})):
        store.add_artifact(row.id, attempt=1, name=name, kind=kind, location="https://hub.example/datasets/me/exp",
                           source="t", rows=3, data=data)
    store.add_event(row.id, "collected", "collected", attempt=1)
    report = build_report(store, row, results_dir=tmp_path / "none")
    assert report["closing"]["missing"] == ["dashboard not built since the last collect (runjob dashboard)"]
    store.add_event(row.id, "dashboard_synced", "rebuilt", attempt=1)
    closing = build_report(store, row, results_dir=tmp_path / "none")["closing"]
    assert closing["line"] == "Job complete. Artifacts at HF: me/exp@abc123. Dashboard synced."
    store.add_artifact(row.id, attempt=1, name="empty-field:response", kind="problem", location="x", source="t",
                       data={"severity": "error", "message": "3 empty responses"})
    closing = build_report(store, row, results_dir=tmp_path / "none")["closing"]
    assert not closing["complete"] and closing["missing"] == ["validation failed: empty-field:response"]
    store.close()


def test_gpu_hours_and_cost_from_the_cluster_price(tmp_path):
    from runjob_core.models import ClusterConfig

    store = Store(tmp_path / "state.db")
    row = make_job(store, resources={"gpus": 4, "nodes": 2})
    for n, (start, end) in enumerate([(0.0, 1800.0), (2000.0, 5600.0)], start=1):
        store.begin_attempt(row.id)
        store.record_submission(row.id, n, "{}", f"local-{n}", start)
        store.update_attempt(row.id, n, state="TIMEOUT" if n == 1 else "COMPLETED", started_at=start, ended_at=end)
    clusters = {"local": ClusterConfig(name="local", settings={"gpu_hour_cost": 2.5})}
    resources = build_report(store, row, clusters=clusters, results_dir=tmp_path / "none")["resources"]
    assert resources == {"gpus": 8, "run_seconds": 5400.0, "gpu_hours": 12.0, "gpu_hour_cost": 2.5, "cost": 30.0}
    store.close()


def test_a_manual_dashboard_build_records_the_sync_of_collected_jobs(tmp_path):
    from runjob_core.reporting import chain
    from runjob_core.reporting.dashboard import Builder, page_name

    store = Store(tmp_path / "state.db")
    row = make_job(store)
    store.add_event(row.id, "collected", "collected", attempt=1)
    builder = Builder(store, tmp_path / "site")
    builder.build()
    assert "dashboard not built" in (tmp_path / "site" / page_name(row.id)).read_text()
    assert chain.record_synced(store, builder) == [row.id]
    assert "dashboard not built" not in (tmp_path / "site" / page_name(row.id)).read_text()
    assert chain.record_synced(store, builder) == []  # nothing collected since
    store.close()


def test_estimate_versus_actual_walltime_and_peak_memory(tmp_path):
    store = Store(tmp_path / "state.db")
    row = make_job(store, resources={"time": "1:00:00", "mem": "64G"})
    store.begin_attempt(row.id)
    store.record_submission(row.id, 1, "{}", "local-1", 100.0)
    store.update_attempt(row.id, 1, state="COMPLETED", started_at=100.0, ended_at=100.0 + 2 * 3600 + 5)
    store.add_event(row.id, "estimates", "2 pre-flight estimates", data={"estimates": [
        {"source": "runjob-core", "summary": "about 00:45:00", "data": {"walltime": "00:45:00"}},
        {"source": "runjob-estimator", "summary": "fits", "data": {"total_gib": 38.5}}]})
    store.add_metrics(row.id, 1, [("peak_memory_gb", 1.0, 1.0, 30.25), ("peak_memory_gb", 2.0, 2.0, 41.5)], source="job")
    estimate = build_report(store, row, results_dir=tmp_path / "none")["estimate"]
    assert {k: estimate[k] for k in ("actual_walltime", "requested_walltime", "requested_seconds", "estimated_walltime",
                                     "estimated_memory_gib", "peak_memory_gib", "requested_memory")} == {
        "actual_walltime": "2:00:05", "requested_walltime": "1:00:00", "requested_seconds": 3600,
        "estimated_walltime": "00:45:00", "estimated_memory_gib": 38.5, "peak_memory_gib": 41.5, "requested_memory": "64G"}
    store.close()


def test_a_new_builder_reuses_the_results_summaries_of_the_last_build(tmp_path, monkeypatch):
    from runjob_core.reporting import dashboard
    from runjob_core.reporting import results as results_module

    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state.db")
    row = make_job(store, name="cached")
    write_rows(tmp_path / "results" / "cached", known_rows())
    _results_folder.write(tmp_path / "results" / "cached", row.id, 1, ["results.jsonl"], final=True)  # as collect leaves it
    dashboard.Builder(store, tmp_path / "site").build()

    def no_reading(folder):
        raise AssertionError(f"read {folder} again")

    monkeypatch.setattr(results_module, "load_rows", no_reading)
    dashboard.Builder(store, tmp_path / "site").build()  # collect's builder is new each time
    assert "mean 0.636364" in (tmp_path / "site" / dashboard.page_name(row.id)).read_text()
    (tmp_path / "results" / "cached" / "results.jsonl").write_text('{"id": 1, "score": 0}\n')  # changed: read again
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    dashboard.Builder(store, tmp_path / "site").build()
    assert "mean 0, median 0" in (tmp_path / "site" / dashboard.page_name(row.id)).read_text()
    store.close()


def test_cluster_page_sums_gpu_hours_by_cluster_and_week(tmp_path, monkeypatch):
    import calendar
    import re

    from runjob_core.reporting.dashboard import Builder

    monkeypatch.chdir(tmp_path)
    store = Store(tmp_path / "state.db")
    monday = calendar.timegm((2026, 11, 23, 12, 0, 0))  # ISO week 2026-W48
    for name, cluster, start, hours, gpus in (("a", "della", monday, 2, 4), ("b", "della", monday + 86400, 1, 4),
                                               ("c", "della", monday + 7 * 86400, 3, 2), ("d", "<lab>", monday, 5, 1)):
        row = make_job(store, name=name, resources={"gpus": gpus})
        store._db.execute("UPDATE jobs SET cluster = ? WHERE id = ?", (cluster, row.id))
        store.begin_attempt(row.id)
        store.record_submission(row.id, 1, "{}", "x", start)
        store.update_attempt(row.id, 1, state="COMPLETED", started_at=start, ended_at=start + hours * 3600)
    Builder(store, tmp_path / "site").build()
    page = (tmp_path / "site" / "clusters.html").read_text()
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td data-sort=\"[^\"]*\">(.*?)</td></tr>", page)
    assert rows == [("&lt;lab&gt;", "2026-W48", "5.00"), ("della", "2026-W48", "12.00"), ("della", "2026-W49", "6.00")]
    store.close()


@pytest.mark.parametrize("benchmark, scores, labels", [
    ("gsm8k", [100.0, 0.0, 100.0, 100.0], ["score-out-of-range"]),         # a 0-100 scale where 0-1 is meant
    ("mmlu", [1.0] * 6 + [0.0] * 34, ["score-below-chance"]),               # 0.15 < 0.25 with 4 options
    ("mmlu", [1.0] * 12 + [0.0] * 28, []),                                   # 0.30: above chance
    ("mmlu", [0.0] * 5 + [1.0], []),                                         # too few rows to call it
])
def test_scores_against_the_benchmark_reference(tmp_path, runjob_home, benchmark, scores, labels):
    store = Store(tmp_path / "state.db")
    row = make_job(store, benchmark=benchmark)
    write_rows(tmp_path / "res", [{"id": i, "score": s, "response": "x"} for i, s in enumerate(scores)])
    anomalies = build_report(store, row, results_dir=tmp_path / "res")["anomalies"]
    found = [a["label"] for a in anomalies if a["label"] in ("score-out-of-range", "score-below-chance")]
    assert found == labels
    store.close()


def test_every_shipped_reference_states_its_score_range():
    from runjob_core import references

    pack = [r for r in references.all_references() if r.source == references.CORE_SOURCE]
    assert len(pack) == 10
    for reference in pack:
        expected = references.reference_metadata(reference)["expected_score"]
        assert expected["min"] == 0.0 and expected["max"] == 1.0, reference.name
