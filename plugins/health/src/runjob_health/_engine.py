"""The scanner's prefilter engines: Hyperscan when it is installed, else ``bytes.find`` passes.

Both answer one question for a buffer region: which records are worth inspecting in Python?

* Hyperscan (:func:`family_candidates`) runs every family pattern and the idle-state patterns
  (traceback start, ``Killed``, completion rows...) in one pass and reports, per match, the
  last byte and the family id.  The scanner then runs only the matched families' labels on
  that record: a near-miss line (``error`` in a metric name) never reaches Python.
* The fallback (:class:`BytesFind`) finds the literal anchors of :mod:`runjob_health._patterns`
  and returns their *start* positions; the scanner then checks every label whose anchor is in
  the record.

Both find every record that a check reacts to, and Python decides with the same regexes, so
the findings are identical; ``tests/test_health_engines.py`` runs both over every fixture.

Choice: ``RUNJOB_HEALTH_ENGINE=auto`` (default: Hyperscan if importable), ``hyperscan`` or
``python``.  Hyperscan scans straight from a memory-mapped file (no copy), which is why
``scan_file`` maps the file on this engine.
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from pathlib import Path

from . import _patterns as P

ENV = "RUNJOB_HEALTH_ENGINE"
ENGINES = ("hyperscan", "python")

_hs = None            # the hyperscan module once imported, False when it is not installed
_DATABASES: dict = {}  # ("families", with token counts) -> compiled hyperscan database
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


_BOUNDED = re.compile(rb"\{(\d+),(\d+)\}\??")


def _record_expression(pattern: bytes) -> bytes:
    """A record regex as a Hyperscan expression over the whole buffer: ``^``/``$`` mean a
    record's edges, which are ``\\n`` (multiline mode) or ``\\r``."""
    out = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i:i + 1]
        if c == b"\\":
            # word boundaries are dropped: the prefilter only needs to match at least as much,
            # and Hyperscan 5.4 misses some matches of a \\b before an alternation (seen on
            # "job preempted" after a line with an "@"; the fixture tests compare engines)
            if pattern[i + 1:i + 2] != b"b" or in_class:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if c == b"]":
                in_class = False
        elif c == b"[":
            in_class = True
            out.append(c)
            i += 1
            # a "]" right after "[" or "[^" is a literal member
            if pattern[i:i + 1] == b"^":
                out.append(b"^")
                i += 1
            if pattern[i:i + 1] == b"]":
                out.append(b"]")
                i += 1
            continue
        elif c == b"{":
            # a bounded repeat {m,n}: Hyperscan builds a state per step (compiling .{0,200} costs
            # ~100 ms); * or + matches at least as much, which is all a prefilter needs
            m = _BOUNDED.match(pattern, i)
            if m is not None:
                out.append(b"*" if int(m.group(1)) == 0 else b"+")
                i = m.end()
                continue
        elif c == b"^":
            c = b"(?:^|\r)"
        elif c == b"$":
            c = b"(?:$|\r)"
        out.append(c)
        i += 1
    return b"".join(out)


def family_expressions(with_tokens: bool) -> tuple[list[bytes], list[int]]:
    """Every family pattern with its family's id (the index in ``FAMILIES``), then the patterns of
    the records that change scanner state while it is idle (ids after the families).  One
    expression per pattern, not one alternation per family: Hyperscan compiles the separate
    expressions about four times faster."""
    exprs = [(P.FAMILY_PREFILTER.get(p, p), i) for i, f in enumerate(P.FAMILIES) for p in f.patterns]
    state = list(P.STATE_PATTERNS) + ([P.TOKEN_COUNT] if with_tokens else [])
    exprs += [(p, len(P.FAMILIES) + k) for k, p in enumerate(state)]
    return [_record_expression(p) for p, _ in exprs], [i for _, i in exprs]


def family_database(with_tokens: bool):
    """Compiled in prefilter mode: lookarounds Hyperscan cannot run become approximations that
    match at least as much, so every record a family's Python regex matches is reported.

    Compiling the ~140 expressions takes ~0.2 s, more than scanning 256 MiB, so the compiled
    database is kept in ``$XDG_CACHE_HOME/runjob`` (``~/.cache``), keyed by a hash of the
    expressions and the Hyperscan version, like a .pyc; a read-only or damaged cache only
    means compiling again."""
    key = ("families", with_tokens)
    with _LOCK:
        db = _DATABASES.get(key)
        if db is None:
            db = _DATABASES[key] = _cached_or_compiled(*family_expressions(with_tokens))
        return db


def _cached_or_compiled(exprs: list[bytes], ids: list[int]):
    hs = hyperscan_module()
    flags = [hs.HS_FLAG_PREFILTER | hs.HS_FLAG_MULTILINE] * len(exprs)
    key = repr((hs.__version__, exprs, ids, flags, os.uname().machine)).encode()
    digest = f"{zlib.crc32(key):08x}{zlib.adler32(key):08x}"   # hashlib's import costs more than this
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "runjob" / f"health-{digest}.hsdb"
    try:
        db = hs.loadb(cache.read_bytes(), hs.HS_MODE_BLOCK)
        db.scratch = hs.Scratch(db)
        return db
    except (OSError, hs.error):
        pass  # first run, a newer Hyperscan or a damaged file: compile and write it again
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=flags)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}")
        tmp.write_bytes(hs.dumpb(db))
        tmp.replace(cache)
    except OSError:
        pass  # a read-only home: compile again next time
    return db


def family_candidates(buf, lo: int, hi: int, with_tokens: bool) -> tuple[list[int], list[int]]:
    """Positions (last byte of each match, sorted) in buf[lo:hi] and the expression id of each.
    Only records that matched a family or a state pattern come back: near-miss lines (a metric
    named *_error, "nan" inside a word) cost nothing in Python.  GIL released while scanning."""
    packed: list[int] = []
    add = packed.append

    def on_match(expr_id, _start, end, _flags, _ctx):
        add(((lo + end - 1) << 8) | expr_id)

    with memoryview(buf) as view, view[lo:hi] as region:   # released at once: a mapped file can close
        family_database(with_tokens).scan(region, match_event_handler=on_match)
    packed.sort()
    return [v >> 8 for v in packed], [v & 0xFF for v in packed]


PLAN_MIN_BYTES = 256 << 10  # regions at least this big get a rare-byte search plan
PLAN_REFRESH_BYTES = 256 << 20
PLAN_SAMPLE_BYTES = 512 << 10
_PLAN_CACHE: dict = {}   # anchors -> (plan, bytes scanned with it)
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class BytesFind:
    """The fallback engine: one ``bytes.find`` pass per anchor, or a ``memchr`` loop over one
    of its rarer bytes, chosen from a byte-frequency sample; returns anchor start positions."""

    def __init__(self, anchors: tuple[bytes, ...]):
        self.anchors = anchors
        self.plan = None                 # (fast anchors, [(byte, [(offset, anchors)])])
        self.plan_age = 0

    def _make_plan(self, buf, lo: int, hi: int):
        """Pick, per anchor, bytes.find (fastsearch) or a memchr loop over one
        of its bytes, by measuring on a sample of this region.  Anchors that
        share a byte at the same offset share one loop and one
        ``startswith(tuple)`` test per occurrence.  Only the speed depends on
        the plan; the candidate set is the same."""
        start = lo + (hi - lo) // 3
        sample = buf[start:start + min(PLAN_SAMPLE_BYTES, max(16384, (hi - lo) // 8))]
        scale = (1 << 20) / max(1, len(sample))         # costs per MiB
        occ: dict[int, int] = {}
        loops: dict[int, dict[int, list]] = {}
        fast = []
        for a in self.anchors:
            t0 = time.perf_counter()
            n = sample.count(a)
            best = ((time.perf_counter() - t0) + n * 3e-7) * scale
            choice = None
            for i, b in enumerate(a):
                if b not in occ:
                    occ[b] = sample.count(bytes((b,)))
                k = occ[b] * scale
                cost = 0.0 if b in loops else 2e-5 + k * 3e-7
                cost += k * (3e-8 if i in loops.get(b, {}) else 1.5e-7)
                if cost < best:
                    best, choice = cost, (b, i)
            if choice is None:
                fast.append(a)
            else:
                loops.setdefault(choice[0], {}).setdefault(choice[1], []).append(a)
        rare = [(bytes((b,)), [(off, tuple(group)) for off, group in offs.items()]) for b, offs in loops.items()]
        return fast, rare

    def candidates(self, buf, lo: int, hi: int) -> list[int]:
        size = hi - lo
        if self.plan is None and self.anchors in _PLAN_CACHE:
            # reuse the plan of an earlier scanner in this process (speed only)
            self.plan, self.plan_age = _PLAN_CACHE[self.anchors]
        if size >= PLAN_MIN_BYTES and (self.plan is None or self.plan_age >= PLAN_REFRESH_BYTES):
            self.plan = self._make_plan(buf, lo, hi)
            self.plan_age = 0
        self.plan_age += size
        if self.plan is not None:
            _PLAN_CACHE[self.anchors] = (self.plan, self.plan_age)
        if self.plan is None or size < 4096:
            fast, rare = self.anchors, ()
        else:
            fast, rare = self.plan
        out: list[int] = []
        add = out.append
        find = buf.find
        startswith = buf.startswith
        guarded = P.GUARDED
        word = _WORD
        suffix = P.GUARD_ALLOWED_SUFFIX
        for a in fast:
            i = find(a, lo, hi)
            if i < 0:
                continue
            la = len(a)
            if a in guarded:
                while i >= 0:
                    j = i + la
                    if j >= hi or buf[j] not in word or startswith(suffix, j):
                        add(i)
                    i = find(a, j, hi)
            else:
                while i >= 0:
                    add(i)
                    i = find(a, i + la, hi)
        for b, groups in rare:
            i = find(b, lo, hi)
            if len(groups) == 1:
                off, group = groups[0]
                while i >= 0:
                    s = i - off
                    if s >= lo and startswith(group, s):
                        self._rare_hit(buf, s, hi, group, add)
                    i = find(b, i + 1, hi)
            else:
                while i >= 0:
                    for off, group in groups:
                        s = i - off
                        if s >= lo and startswith(group, s):
                            self._rare_hit(buf, s, hi, group, add)
                    i = find(b, i + 1, hi)
        out.sort()
        return out

    @staticmethod
    def _rare_hit(buf, s: int, hi: int, group: tuple, add) -> None:
        for a in group:
            if not buf.startswith(a, s):
                continue
            j = s + len(a)
            if j > hi:
                continue
            if a in P.GUARDED and j < hi and buf[j] in _WORD and not buf.startswith(P.GUARD_ALLOWED_SUFFIX, j):
                continue
            add(s)
            return
