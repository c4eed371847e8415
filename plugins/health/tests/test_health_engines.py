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


def test_hyperscan_sends_only_family_matches_to_python():
    """Issue 29: verification costs per finding, not per near-miss line.  Hyperscan reports family
    ids, so a line with "error" in a metric name or "nan" inside a word never reaches Python.
    The bytes.find engine's anchors are coarser (it inspects more records) but, with the
    guarded "Error" anchor, not these."""
    near_miss = [
        b"{'eval_loss': 0.41, 'eval_mean_abs_error': 0.12, 'eval_nan_count': 0, 'epoch': 1.2}",
        b"[WARNING|trainer.py:1201] error_if_nonfinite=False; nan_guard skipped 0 non-finite grads",
        b"{'train/error_rate': 0.03, 'train/nan_guard_triggered': 0, 'oom_score_adj': 0}",
        b"step 100 | loss 1.2 | terrorism_filter dropped 3 rows | Errors: 0",
        b"INFO: retrying after error (attempt 1/5) ... ok",
    ]
    py, hs = LogScanner(engine="python"), LogScanner(engine="hyperscan")
    for rec in near_miss:
        buf = rec + b"\n"
        assert hs._candidates(buf, 0, len(buf)) == [], rec    # no family matches: never reaches Python
        assert run(buf, cls=_ReferenceScanner) == []
    recs = [r for e in INDEX for r in re.split(rb"[\r\n]", (DATA / e["file"]).read_bytes())]
    n_py = sum(bool(py._candidates(r + b"\n", 0, len(r) + 1)) for r in recs)
    n_hs = sum(bool(hs._candidates(r + b"\n", 0, len(r) + 1)) for r in recs)
    assert n_hs < n_py
    assert all(py._candidates(r + b"\n", 0, len(r) + 1) == [] for r in near_miss)


def test_hyperscan_expressions_keep_record_edges_and_drop_bounded_repeats():
    expr = _engine._record_expression
    assert expr(rb"^\s*Reason:\s+Evicted\b") == b"(?:^|\r)" + rb"\s*Reason:\s+Evicted"     # a CR byte
    assert expr(rb"\bImportError\b(?::|$)") == b"ImportError(?::|(?:$|\r))"
    assert expr(rb"THCudaCheck FAIL.{0,200}out") == rb"THCudaCheck FAIL.*out"
    assert expr(rb"[^\]]{1,80}?x[$^]") == rb"[^\]]+x[$^]"
    # a record after a \r (tqdm redraw) starts a record for ^ too
    hits = run(b"\r 50%|#####| 5/10\r   Reason:   Evicted\n", cls=lambda **kw: LogScanner(engine="hyperscan", **kw))
    assert [h.label for h in hits] == ["preempted"]


def test_compiled_database_is_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    exprs, ids = _engine.family_expressions(False)
    db = _engine._cached_or_compiled(exprs, ids)
    cached = list((tmp_path / "runjob").glob("health-*.hsdb"))
    assert len(cached) == 1
    again = _engine._cached_or_compiled(exprs, ids)            # loaded, not compiled
    found = []
    again.scan(b"x\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n",
               match_event_handler=lambda i, s, e, f, c: found.append(i))
    assert found and all(_engine.P.FAMILIES[i].label == "cuda_oom" for i in found)
    cached[0].write_bytes(b"damaged")                          # a damaged file: compiled again
    assert _engine._cached_or_compiled(exprs, ids) is not None and cached[0].read_bytes() != b"damaged"
    del db


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
        s._lazy = f.fileno()
        hits = s.feed(mm)
        assert [(h.label, h.line) for h in hits] == [("nan_loss", 5001)]
        assert s._gaps                                  # the 7000 lines after it: not counted yet
        assert s.lines_seen == 12001 and not s._gaps
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


def test_cheaper_prefilter_expressions_match_at_least_what_their_pattern_matches():
    """Each PREFILTER stand-in must match every record its real pattern matches (on every
    fixture record and the single-line positives), or Hyperscan would hide a finding."""
    from runjob_health import _families
    from test_health_scan import POSITIVE

    recs = [r for e in INDEX for r in re.split(rb"[\r\n]", (DATA / e["file"]).read_bytes())]
    recs += [ln.encode() for ln, _ in POSITIVE]
    recs += [b"{'loss': nan}", b"loss=inf,", b"grad_norm: -Infinity", b"3/8 [00:02<00:03]Killed", b"loss nan"]
    assert _families.PREFILTER
    for pattern, wider in _families.PREFILTER.items():
        rx, wide = re.compile(pattern), re.compile(wider, re.MULTILINE)
        seen = 0
        for rec in recs:
            if rx.search(rec):
                seen += 1
                assert wide.search(rec), (pattern, rec)
        assert seen, pattern
