"""The scanner's prefilter engines: Hyperscan when it is installed, else ``bytes.find`` passes.

Both answer the same question for a buffer region: where are the records that contain an
anchor occurrence passing its guard (see :mod:`runjob_health._patterns`)?  The Python
engine (in ``_scan.LogScanner``) returns anchor *start* positions; Hyperscan returns the
last byte of each match.  Either position lies inside the same record (anchors hold no line
terminator; a guard byte that is a terminator ends that very record), so the scanner
inspects the same records and the findings are identical; ``tests/test_health_engines.py``
runs both over every fixture.

Choice: ``RUNJOB_HEALTH_ENGINE=auto`` (default: Hyperscan if importable), ``hyperscan`` or
``python``.  Hyperscan matches all ~80 anchors in one pass at several GB/s, straight from a
memory-mapped file (no copy), which is why ``scan_file`` maps the file on this engine.
"""

from __future__ import annotations

import os
import re
import threading

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

    with memoryview(buf) as view, view[lo:hi] as region:   # released at once: a mapped file can close
        database(anchors).scan(region, match_event_handler=on_match)
    out.sort()
    return out
