"""The last log line a GPU-idle finding quotes, read from the window's end, is the one the
whole-window split gives."""

from __future__ import annotations

import pytest

from runjob_core.defaults.gpu_health import last_line


def _by_splitting(window: str) -> str:
    lines = [line for line in window.splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


@pytest.mark.parametrize("window", [
    "", "\n\n  \n", "one", "one\ntwo\n", "one\ntwo\n\n   \n\t\n", "a\r\nb\r\n", "a\rb", "x\u2028y\x0c",
    "  indented last  \n", "long " * 2000 + "\n", "head\n" + "z" * 5000, "head\n" + "z" * 70000 + "\n\n",
    "step 1 loss 2.0\n" * 10000 + "   \n", "a\x1cb\x1d", "\x85tail\x85",
])
def test_the_last_line_read_from_the_end_is_the_last_line_of_the_whole_split(window):
    assert last_line(window) == _by_splitting(window)
