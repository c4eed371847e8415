"""Issue 29: the health scan gets faster without its findings moving.

Every log fixture of the project (the health plugin's labelled and held-out corpora, the real
framework and vLLM logs of the core's tests) gives the same findings on both prefilter engines
(Hyperscan and the ``bytes.find`` fallback), fed as the monitor feeds it (odd chunk sizes) or
as ``runjob health scan`` reads it (the memory-mapped whole file), as the reference scanner
that inspects every record. And ``runjob health scan`` decodes no text window when every
installed checker reads the file itself (the core's GPU check has nothing to say offline).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runjob_core.context import offline_context
from runjob_core.monitor import scan as core_scan
from runjob_health import _scan

pytest.importorskip("hyperscan")

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_DIRS = [ROOT / "tests" / "data" / "framework_logs", ROOT / "tests" / "data" / "vllm_server_logs",
                ROOT / "plugins" / "health" / "tests" / "data" / "logs",
                ROOT / "plugins" / "health" / "tests" / "data" / "heldout"]
FIXTURES = sorted(p for d in FIXTURE_DIRS for p in d.rglob("*") if p.is_file() and p.suffix != ".json")


def _fed(data: bytes, engine: str, max_tokens: int | None, size: int, cls=_scan.LogScanner) -> list:
    scanner = cls(max_tokens=max_tokens, engine=engine)
    hits = [h for at in range(0, len(data), size) for h in scanner.feed(data[at:at + size])]
    return hits + scanner.finish()


def test_the_fixture_corpus_is_all_there():
    assert len(FIXTURES) >= 150 and all(any(p.parent.is_relative_to(d) for p in FIXTURES) for d in FIXTURE_DIRS)


@pytest.mark.parametrize("max_tokens", [None, 256])
@pytest.mark.parametrize("path", FIXTURES, ids=[str(p.relative_to(ROOT)) for p in FIXTURES])
def test_every_fixture_log_gives_the_same_findings_on_both_engines(path, max_tokens):
    data = path.read_bytes()
    reference = _fed(data, "python", max_tokens, len(data) + 1, cls=_scan._ReferenceScanner)
    for engine in ("hyperscan", "python"):
        assert _scan.scan_file(path, max_tokens=max_tokens, engine=engine) == reference, engine
        for size in (4099, 131):
            assert _fed(data, engine, max_tokens, size) == reference, (engine, size)


def test_an_offline_scan_decodes_no_window_when_every_checker_reads_the_whole_file(tmp_path, monkeypatch):
    """Decoding a 256 MiB log into text windows for the core's GPU check alone cost ~0.5 s, twice
    the whole Hyperscan pass; the GPU check has no telemetry offline and reads nothing."""
    log = tmp_path / "train.log"
    log.write_bytes(b"{'loss': 1.2, 'eval_mean_abs_error': 0.1}\n" * 1000
                    + b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")

    def no_windows(path):
        raise AssertionError(f"{path} was decoded into windows")

    monkeypatch.setattr(core_scan, "_windows", no_windows)
    context = offline_context()
    try:
        found = [(f.label, f.line) for f in core_scan.scan_file(context, log)]
    finally:
        context.close()
        context.store.close()
    assert found == [("cuda_oom", 1001)]
