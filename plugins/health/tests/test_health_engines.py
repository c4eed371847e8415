"""The two prefilter engines (Hyperscan, bytes.find) must give identical findings."""

from __future__ import annotations

import random
import re

import pytest

import runjob_health
from runjob_health import _engine, _scan
from runjob_health._scan import LogScanner, _ReferenceScanner

from test_health_scan import DATA, INDEX, run, run_chunked, synthetic_log

hyperscan = pytest.importorskip("hyperscan")
ENGINES = ("python", "hyperscan")


def scan(data: bytes, engine: str, max_tokens=None):
    return run(data, max_tokens=max_tokens, cls=lambda **kw: LogScanner(engine=engine, **kw))


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_every_fixture_gives_identical_findings_on_both_engines(entry, tmp_path):
    data = (DATA / entry["file"]).read_bytes()
    mt = entry.get("max_tokens")
    ref = run(data, max_tokens=mt, cls=_ReferenceScanner)
    assert scan(data, "python", mt) == scan(data, "hyperscan", mt) == ref
    # whole-file path: Hyperscan scans the memory-mapped file, line numbers counted on demand
    assert _scan.scan_file(DATA / entry["file"], max_tokens=mt, engine="hyperscan") == ref
    for size in (4099, 64):
        assert _scan.scan_file(DATA / entry["file"], max_tokens=mt, chunk_size=size, engine="python") == ref


def test_engines_inspect_the_same_records():
    """Hyperscan reports match ends, bytes.find match starts: both must land in the same records."""
    recs = [r for e in INDEX for r in re.split(rb"[\r\n]", (DATA / e["file"]).read_bytes())]
    recs += [b"loss: nan", b"Infinity", b"info", b"grad_norm=inf", b"x nan", b"nanosecond", b"Inf"]
    py, hs = LogScanner(max_tokens=10, engine="python"), LogScanner(max_tokens=10, engine="hyperscan")
    hit = 0
    for rec in recs:
        buf = rec + b"\n"
        a, b = py._candidates(buf, 0, len(buf)), hs._candidates(buf, 0, len(buf))
        assert bool(a) == bool(b), rec
        assert all(0 <= c < len(buf) for c in a + b), rec
        hit += bool(a)
    assert hit > 300


def test_synthetic_log_both_engines_streamed_in_odd_chunks(tmp_path):
    synth = synthetic_log(2)
    ref = run(synth, max_tokens=256, cls=_ReferenceScanner)
    r = random.Random(5)
    for engine in ENGINES:
        sizes = iter(lambda: r.choice([1, 3, 100, 4096, 65536, 300000]), None)
        assert run_chunked(synth, sizes, max_tokens=256, cls=lambda **kw: LogScanner(engine=engine, **kw)) == ref
    p = tmp_path / "synth.log"
    p.write_bytes(synth)
    assert _scan.scan_file(p, max_tokens=256, engine="hyperscan") == ref
    # no final newline, and a file that cannot be mapped (empty) falls back to reading
    p.write_bytes(synth + b"torch.OutOfMemoryError: CUDA out of memory.")
    assert (_scan.scan_file(p, max_tokens=256, engine="hyperscan")
            == _scan.scan_file(p, max_tokens=256, engine="python"))
    p.write_bytes(b"")
    assert _scan.scan_file(p, engine="hyperscan") == []


def test_line_numbers_are_counted_on_demand_only(tmp_path):
    """A mapped healthy file needs no line count; a finding or lines_seen still gets it right."""
    import mmap

    data = b"step 1 | loss 1.0\n" * 5000 + b"{'loss': nan}\n" + b"step 2 | loss 0.9\n" * 7000
    p = tmp_path / "run.log"
    p.write_bytes(data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        s = LogScanner(engine="hyperscan")
        s._lazy_lines = True
        hits = s.feed(mm)
        assert [(h.label, h.line) for h in hits] == [("nan_loss", 5001)]
        assert s._gap is not None                       # the 7000 lines after it: not counted yet
        assert s.lines_seen == 12001 and s._gap is None
    assert [(h.label, h.line) for h in _scan.scan_file(p)] == [("nan_loss", 5001)]
    # a last line without a newline: counted only when it matters
    for tail, want in ((b"\r 99%|#########9| 99/100", []), (b"{'loss': inf}", [("nan_loss", 12002)])):
        p.write_bytes(data + tail)
        got = [(h.label, h.line) for h in _scan.scan_file(p) if h.line > 5001]
        assert got == want == [(h.label, h.line) for h in _scan.scan_file(p, engine="python") if h.line > 5001]


def test_engine_selection(monkeypatch):
    monkeypatch.delenv(_engine.ENV, raising=False)
    assert LogScanner().engine == "hyperscan"            # installed: the default
    monkeypatch.setenv(_engine.ENV, "python")
    assert LogScanner().engine == "python"
    assert LogScanner(engine="hyperscan").engine == "hyperscan"
    monkeypatch.setenv(_engine.ENV, "re2")
    with pytest.raises(ValueError, match="RUNJOB_HEALTH_ENGINE='re2' is not an engine"):
        LogScanner()
    monkeypatch.setattr(_engine, "_hs", False)           # as if hyperscan were not installed
    monkeypatch.setenv(_engine.ENV, "auto")
    assert LogScanner().engine == "python"
    with pytest.raises(ValueError, match="pip install hyperscan"):
        LogScanner(engine="hyperscan")


def test_public_scan_file_on_both_engines():
    path = DATA / "node_fail" / "ray_heartbeat_lists_oom_and_preemption.log"
    for engine in ENGINES:
        hits = runjob_health.scan_file(path, engine=engine)
        assert [(h.label, h.line, h.severity, h.action) for h in hits] == [("node_fail", 1, "error", "resume")]
