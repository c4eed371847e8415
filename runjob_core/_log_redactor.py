"""A local job's output, redacted on its way into the log file: ``python -m runjob_core._log_redactor``.

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
import select
import sys

HOLD_SECONDS = 0.2
HOLD_BYTES = 4096


def _emit(data: bytes) -> None:
    from runjob_core.redact import redact

    if data:
        text = redact(data.decode("utf-8", "surrogateescape"))
        os.write(1, text.encode("utf-8", "surrogateescape"))


def _split(pending: bytes) -> tuple[bytes, bytes]:
    """(what can be written now, what waits): up to the last whitespace byte."""
    cut = max(pending.rfind(b" "), pending.rfind(b"\n"), pending.rfind(b"\r"), pending.rfind(b"\t"))
    if cut < 0:
        return (pending, b"") if len(pending) > HOLD_BYTES else (b"", pending)
    return pending[: cut + 1], pending[cut + 1:]


def main() -> int:
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], HOLD_SECONDS if pending else None)
        if not ready:
            _emit(pending)  # quiet for a moment: the held tail goes out
            pending = b""
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            _emit(pending)
            return 0
        now, pending = _split(pending + chunk)
        _emit(now)


if __name__ == "__main__":
    sys.exit(main())
