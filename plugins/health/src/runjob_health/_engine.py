"""The scanner's prefilter engines: Hyperscan when it is installed, else ``bytes.find`` passes.

Both answer the same question for a buffer region: where are the records that contain an
anchor occurrence passing its guard (see :mod:`runjob_health._patterns`)?  The Python
engine (in ``_scan.LogScanner``) returns anchor *start* positions; Hyperscan returns the
last byte of each match.  Either position lies inside the same record (anchors hold no line
terminator; a guard byte that is a terminator ends that very record), so the scanner
inspects the same records and the findings are identical; ``tests/test_health_engines.py``
runs both over every fixture.

Choice: ``RUNJOB_HEALTH_ENGINE=auto`` (default: Hyperscan if importable), ``hyperscan`` or
``python``.  Hyperscan matches all ~100 anchors in one pass at several GB/s and releases the
GIL while it scans, so :func:`pipelined_chunks` reads and prefilters the next chunk of a file
in a thread while the caller counts lines and checks candidate records of this one.
"""

from __future__ import annotations

import os
import queue
import re
import threading
from bisect import bisect_left
from typing import Iterator

from . import _patterns as P

ENV = "RUNJOB_HEALTH_ENGINE"
ENGINES = ("hyperscan", "python")

_hs = None            # the hyperscan module once imported, False when it is not installed
_DATABASES: dict = {}  # anchors -> compiled hyperscan database (compiling costs ~10 ms)
_LOCK = threading.Lock()


def hyperscan_module():
    global _hs
    if _hs is None:
        try:
            import hyperscan
        except ImportError:
            _hs = False
        else:
            _hs = hyperscan
    return _hs or None


def resolve(engine: str | None = None) -> str:
    """The engine to use: the argument, else $RUNJOB_HEALTH_ENGINE, else the fastest installed."""
    want = (engine or os.environ.get(ENV) or "auto").strip().lower()
    if want not in ("auto",) + ENGINES:
        raise ValueError(f"{ENV}={want!r} is not an engine: use auto, hyperscan or python")
    if want == "python":
        return "python"
    if hyperscan_module() is None:
        if want == "hyperscan":
            raise ValueError(f"{ENV}=hyperscan but the hyperscan package is not installed: pip install hyperscan")
        return "python"
    return "hyperscan"


def _expression(anchor: bytes) -> bytes:
    expr = re.escape(anchor)
    if anchor in P.GUARDED:
        # the guard of the Python engine: next byte is no word byte, or "inity", or the region ends
        expr += rb"(?:[^A-Za-z0-9_]|" + re.escape(P.GUARD_ALLOWED_SUFFIX) + rb"|$)"
    return expr


def database(anchors: tuple[bytes, ...]):
    with _LOCK:
        db = _DATABASES.get(anchors)
        if db is None:
            hs = hyperscan_module()
            exprs = [_expression(a) for a in anchors]
            db = hs.Database(mode=hs.HS_MODE_BLOCK)
            db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs),
                       flags=[0] * len(exprs))
            _DATABASES[anchors] = db
        return db


def hyperscan_candidates(buf, lo: int, hi: int, anchors: tuple[bytes, ...]) -> list[int]:
    """Sorted positions (last byte of each anchor match) in buf[lo:hi]; GIL released while scanning."""
    out: list[int] = []
    add = out.append

    def on_match(_id, _start, end, _flags, _ctx):
        add(lo + end - 1)

    view = memoryview(buf)
    try:
        database(anchors).scan(view[lo:hi], match_event_handler=on_match)
    finally:
        view.release()
    out.sort()
    return out


def within(cands: list[int], lo: int, hi: int) -> list[int]:
    """The part of a sorted candidate list that lies in [lo, hi)."""
    return cands[bisect_left(cands, lo):bisect_left(cands, hi)]


def pipelined_chunks(f, chunk_size: int, anchors: tuple[bytes, ...]) -> Iterator[tuple[bytearray, list[int]]]:
    """Yield (chunk, its candidates) for a binary file, reading and prefiltering ahead in a thread.

    Chunks are three reused buffers (no fresh pages per chunk): a chunk is only valid until
    the next one is requested, so the caller must copy whatever it keeps.
    """
    bufs = [bytearray(chunk_size) for _ in range(3)]
    handoff: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            i = 0
            while not stop.is_set():
                buf = bufs[i % 3]
                n = f.readinto(buf)
                if not n:
                    break
                chunk = buf if n == chunk_size else bytearray(memoryview(buf)[:n])
                if not put((chunk, hyperscan_candidates(chunk, 0, n, anchors))):
                    return
                i += 1
            put(None)
        except BaseException as exc:  # handed to the consumer, which re-raises it with its traceback
            put(exc)

    worker = threading.Thread(target=produce, name="runjob-health-prefilter", daemon=True)
    worker.start()
    try:
        while True:
            item = handoff.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
