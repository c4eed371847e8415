"""`runjob health scan` of lines with no end (issue 34 item 4): a CUDA OOM after a 20 MB
progress bar redrawn with '\\r' (or after 20 MB with no line end at all, or inside it) is
found by both engines, and the scan's memory stays under a bound computed from its windows
whatever the line length (it held the whole line: 1 GiB took 148 s and 2.0 GiB)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from runjob_core.monitor import scan as core_scan
from runjob_core.testing import run_cli
from runjob_health import _scan

OOM = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
BAR = b"\r 45%|####5     | 4500/10000 [00:01<00:02, 3000.00it/s]" + b" " * 40
ENGINES = ["hyperscan", "python"]


def _bar(size: int) -> bytes:
    return BAR * (size // len(BAR))


def _scan_cli(path, engine: str, cwd) -> list[dict]:
    result = run_cli("health", "scan", str(path), "--json", cwd=cwd, env={"RUNJOB_HEALTH_ENGINE": engine}, timeout=600)
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)[0]["findings"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("log, line", [
    (b"loading\n" + _bar(20 << 20) + b"\n" + OOM + b"\n", 3),            # the bar, then the OOM
    (b"loading\n" + _bar(20 << 20) + b"\r" + OOM + b"\n", 2),            # the bar's last redraw is the OOM
    (b"x" * (20 << 20) + b"\n" + OOM + b"\n", 2),                        # 20 MB with no line end
    (b"x" * (20 << 20) + OOM + b"y" * (3 << 20), 1),                     # inside such a line, no line end after
    (b"x" * ((1 << 20) - 40) + OOM + b"y" * (1 << 20) + b"\n", 1),       # across the first piece's end
], ids=["bar-then-oom", "bar-redrawn-to-oom", "long-line-then-oom", "oom-inside-long-line", "oom-across-pieces"])
def test_a_cuda_oom_after_a_long_line_is_found(tmp_path, engine, log, line):
    path = tmp_path / "run.log"
    path.write_bytes(log)
    found = [(f["label"], f["line"]) for f in _scan_cli(path, engine, tmp_path)]
    assert found == [("cuda_oom", line)]
    # the scanner fed as the monitor feeds it (windows of 8 MiB, the longest line in pieces)
    scanner = _scan.LogScanner(engine=engine)
    hits = [h for at in range(0, len(log), 8 << 20) for h in scanner.feed(log[at:at + (8 << 20)])] + scanner.finish()
    assert [(h.label, h.line) for h in hits] == [("cuda_oom", line)]


def test_completion_rows_of_a_long_line_are_counted_once(tmp_path):
    """A JSON dump on one line: each row counted in one piece only, overlap or not."""
    row = b'{"finish_reason": "stop", "text": "' + b"w" * 300 + b'"}, '
    rows = (3 << 20) // len(row)
    scanner = _scan.LogScanner()
    scanner.feed(b"[" + row * rows + b"]\n")
    assert scanner._fr == [rows, 0]


def test_the_cli_windows_end_at_cr_and_stay_under_two_windows(tmp_path):
    path = tmp_path / "bar.log"
    data = _bar(20 << 20) + b"x" * (20 << 20) + b"\n" + OOM
    path.write_bytes(data)
    windows = list(core_scan._windows(path))
    assert max(len(w) for w in windows) < 2 * core_scan.CHUNK_BYTES
    assert all(w.endswith(("\r", "\n")) for w in windows[:-1])
    assert "".join(windows).replace("\n", "") == data.decode().replace("\n", "")


_PEAK = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=False)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def _peak_rss(path, engine: str) -> int:
    """Peak resident memory (bytes) of `runjob health scan PATH` in a process of its own."""
    runjob = str(__import__("pathlib").Path(sys.executable).parent / "runjob")
    out = subprocess.run([sys.executable, "-c", _PEAK, runjob, "health", "scan", str(path)], capture_output=True,
                         text=True, env={**__import__("os").environ, "RUNJOB_HEALTH_ENGINE": engine}, check=True)
    return int(out.stdout.strip())


@pytest.mark.parametrize("engine", ENGINES)
def test_the_memory_of_a_scan_is_bounded_whatever_the_line_length(tmp_path, engine):
    tiny = tmp_path / "tiny.log"
    tiny.write_bytes(b"step 1\n")
    huge = tmp_path / "huge.log"
    with open(huge, "wb") as f:           # 256 MiB, not one line end
        for _ in range(256):
            f.write(b"x" * (1 << 20))
    try:
        baseline = _peak_rss(tiny, engine)
        peak = _peak_rss(huge, engine)
    finally:
        huge.unlink()
    # what a scan may hold beyond the program itself: the plugin's mapped part of the file
    # (Hyperscan) or its read chunk, its open line's last piece, and the core's windows
    # (a read chunk, the carried-over rest, the decoded text and its copy for each checker)
    bound = _scan.MAP_BYTES + 4 * _scan.LINE_MAX + 6 * core_scan.CHUNK_BYTES
    assert peak - baseline < bound, (peak >> 20, baseline >> 20, bound >> 20)
