"""The two prefilter engines (Hyperscan, bytes.find) must give identical findings."""

from __future__ import annotations

import random
import re

import pytest

import runjob_health
from runjob_health import _engine, _scan
from runjob_health import _patterns as P
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
    # whole-file path: Hyperscan reads and prefilters ahead in a thread, with reused buffers
    for size in (4099, 64, 8 << 20):
        assert (_scan.scan_file(DATA / entry["file"], max_tokens=mt, chunk_size=size, engine="hyperscan")
                == _scan.scan_file(DATA / entry["file"], max_tokens=mt, chunk_size=size, engine="python") == ref)


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
    for size in (1000, 4099, 1 << 20):
        assert _scan.scan_file(p, max_tokens=256, chunk_size=size, engine="hyperscan") == ref


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


def test_pipeline_reraises_a_read_error_and_stops_its_thread(tmp_path):
    class Broken:
        def __init__(self):
            self.n = 0

        def readinto(self, buf):
            self.n += 1
            if self.n == 3:
                raise OSError("disk went away")
            buf[:5] = b"ok 1\n"
            return 5

    chunks = []
    with pytest.raises(OSError, match="disk went away"):
        for chunk, cands in _engine.pipelined_chunks(Broken(), 5, tuple(P.ANCHORS)):
            chunks.append(bytes(chunk))
    assert chunks == [b"ok 1\n", b"ok 1\n"]
