"""The held-out corpus: real logs no rule was tuned on (see corpus_report.py).

Only two things are asserted on it: the index is complete and honest, and no healthy log
raises an alarm (a false stop kills a paid job).  Recall on it is measured, not required:
corpus_report.py prints it before and after, and the README quotes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runjob_health import _patterns as P
from runjob_health._scan import scan_file

HELDOUT = Path(__file__).parent / "data" / "heldout"
TUNING = Path(__file__).parent / "data" / "logs"
INDEX = json.loads((HELDOUT / "index.json").read_text())
ALARMS = {"stop", "resume", "retry"}


def test_heldout_index_is_complete_and_separate_from_the_tuning_corpus():
    assert len(INDEX) >= 30
    assert sum(1 for e in INDEX if not e["labels"]) >= 10
    files = {str(p.relative_to(HELDOUT)) for p in HELDOUT.rglob("*.log")}
    assert files == {e["file"] for e in INDEX}
    tuning_sources = {e["source"] for e in json.loads((TUNING / "index.json").read_text())}
    for e in INDEX:
        assert set(e) >= {"file", "labels", "source", "note"}
        assert set(e["labels"]) <= set(P.LABELS)
        assert e["source"].startswith("https://github.com/"), e     # real public logs only
        assert e["source"] not in tuning_sources, e                  # no thread is in both corpora
        folder = e["file"].split("/")[0]
        assert (folder == "healthy") == (e["labels"] == [])
        assert 1 <= len((HELDOUT / e["file"]).read_bytes().splitlines()) <= 80


@pytest.mark.parametrize("engine", ["python", "hyperscan"])
def test_no_alarm_on_any_healthy_heldout_log(engine):
    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    for e in INDEX:
        if e["labels"]:
            continue
        hits = scan_file(HELDOUT / e["file"], engine=engine)
        assert not [h for h in hits if h.action in ALARMS], (e["file"], [(h.label, h.text[:80]) for h in hits])


def test_report_runs_and_after_is_never_below_before(tmp_path):
    import corpus_report

    old = corpus_report.extract(corpus_report.BEFORE, tmp_path)
    before, after = corpus_report.measure(old, HELDOUT), corpus_report.measure(corpus_report.SRC, HELDOUT)
    assert after["healthy_alarms"] == 0
    for label, row in after["labels"].items():
        if row["recall"] is not None and label in before["labels"] and before["labels"][label]["recall"] is not None:
            assert row["recall"] >= before["labels"][label]["recall"], label
    assert "| cuda_oom |" in corpus_report.table("heldout", before, after)
