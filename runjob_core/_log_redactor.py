"""A local job's output, redacted on its way into the log file: ``python -S -I runjob_core/_log_redactor.py``.

A local job inherits the user's environment, tokens included, and its log is a plain file
the monitor, ``runjob logs`` and the dashboard read. The local backend pipes the job's
stdout and stderr through this filter, which writes them to stdout (the log) with
:func:`runjob_core.redact.redact` applied, as every other output of runjob is.

Output is passed on as it comes (the monitor follows the log live, tqdm bars redraw with
``\\r``): a chunk is written up to its last whitespace at once, and the rest (possibly
the first half of a token) waits for more bytes, at most :data:`HOLD_SECONDS` or
:data:`HOLD_BYTES`. A token holds no whitespace, so it is never written in two halves.
"""

from __future__ import annotations

import os
import re
import select
import sys

HOLD_SECONDS = 0.2
HOLD_BYTES = 4096
CHUNK = 1 << 20


def _pattern() -> re.Pattern[bytes]:
    """One bytes pattern: the secret values of this environment (longest first) and the token
    shapes of :mod:`runjob_core.redact`, built once (the environment does not change)."""
    from runjob_core import redact

    values = [re.escape(v.encode("utf-8", "surrogateescape")) for v in redact._secret_values()]
    return re.compile(b"|".join([*values, redact._TOKEN_PATTERNS.pattern.encode()]))


def _split(pending: bytes) -> tuple[bytes, bytes]:
    """(what can be written now, what waits): up to the last whitespace byte."""
    cut = max(pending.rfind(b" "), pending.rfind(b"\n"), pending.rfind(b"\r"), pending.rfind(b"\t"))
    if cut < 0:
        return (pending, b"") if len(pending) > HOLD_BYTES else (b"", pending)
    return pending[: cut + 1], pending[cut + 1:]


#: Every token shape of runjob_core.redact starts with one of these: output without any of them
#: (nearly all of it) is written through without running the pattern (~1 GB/s instead of ~25 MB/s).
_TOKEN_STARTS = (b"hf_", b"rpa_", b"sk-", b"gh", b"github_pat_", b"xox", b"AKIA")


def main() -> int:
    import signal

    from runjob_core import redact

    # A cancel signals the job's whole process group, this filter included: it must outlive
    # the job's own last words (the trap's "SIGTERM: stopping ..." lines) and end at EOF, when
    # every writer is gone. The final SIGKILL of a cancel still ends it.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)

    pattern = _pattern()
    needles = (*_TOKEN_STARTS, *(v.encode("utf-8", "surrogateescape") for v in redact._secret_values()))

    def emit(data: bytes) -> None:
        if data:
            os.write(1, pattern.sub(b"***", data) if any(n in data for n in needles) else data)

    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], HOLD_SECONDS if pending else None)
        if not ready:
            emit(pending)  # quiet for a moment: the held tail goes out
            pending = b""
            continue
        chunk = os.read(0, CHUNK)
        if not chunk:
            emit(pending)
            return 0
        now, pending = _split(pending + chunk)
        emit(now)


if __name__ == "__main__":
    # Started as a file with `python -S -I` (no site-packages: 40 ms instead of 110 ms per job);
    # runjob_core itself needs nothing but the standard library for this.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
