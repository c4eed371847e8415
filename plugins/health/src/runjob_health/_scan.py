"""Streaming log health checks (pure Python, stdlib only, no runjob imports).

    scanner = LogScanner(max_tokens=None, start_line=0)
    hits = scanner.feed(chunk)        # any chunk size, keeps the partial last line
    hits += scanner.finish()          # end of stream: flush + pending decisions
    hits = scan_file(path)            # the same for a whole file
    hits = findings_for_state("TIMEOUT", None)

Design (see ``_patterns`` for the speed contract):

* The log is split into *records* at ``\\n`` and ``\\r`` (tqdm redraws); line
  numbers count ``\\n`` only and are 1-based (plus ``start_line``).
* Large chunks are not split into lines.  A prefilter finds the literal
  anchors of all checks and only the records around those positions are
  inspected.  Two engines (:mod:`runjob_health._engine`): Hyperscan (one pass
  for all anchors, used when installed) or ``bytes.find`` passes (or a
  ``memchr`` loop over the anchor's rarest byte, chosen from a byte-frequency
  sample); the findings are the same.  While a traceback or a
  ``Killed`` line is pending, records are inspected one by one until the
  decision is made.  ``_ReferenceScanner`` inspects every record; the tests
  check that both give identical hits.
* One physical event gives one hit per label: a label that matched within the
  previous ``BURST_LINES`` lines is not reported again.
* Truncation: completion rows (``finish_reason``, or output token counts when
  ``max_tokens`` is known) are a finding when at least ``TRUNCATION_SHARE`` of
  ``TRUNCATION_MIN_ROWS`` or more are cut off, or when *all* of fewer rows
  are (a canary, a pasted excerpt); trainer metric rows likewise
  (``clipped_ratio`` 1 / ``mean_terminated_length`` 0 = every completion
  clipped).  An eval harness saying it cut the context is a finding at once.
* A Python traceback stays pending until ``LOOKAHEAD_LINES`` further lines
  arrive, a line says the process is exiting, or ``finish()``.  If at least
  ``PROGRESS_MIN`` of those lines look like normal progress and none says the
  process exited, the traceback was caught: it (and any specific label found
  inside it) is reported as warning/continue.  A traceback explained by a
  specific label (inside it, or within ``BURST_LINES`` before it) gives no
  separate ``traceback`` hit.
* A record longer than ``LINE_MAX`` (a line that never ends) is checked in pieces of
  ``LINE_MAX`` overlapping by ``LINE_OVERLAP``, all with its line number: a match shorter than
  the overlap is never cut, the labels of the overlap are said once (same line), a completion
  row is counted in the one piece where it starts, and the traceback and ``Killed`` steps see
  the first piece (where a record's structure is).  Only the last ``LINE_MAX`` bytes of an
  open line are kept, so memory is bounded whatever the line length.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field

from . import _engine
from . import _patterns as P

__all__ = ["Hit", "LogScanner", "scan_file", "findings_for_state"]

BURST_LINES = 100          # same label again within this many lines = same event
LOOKAHEAD_LINES = 20       # lines to wait after a traceback before deciding
PROGRESS_MIN = 3           # progress-looking lines needed to call a traceback caught
EVENT_MAX_RECORDS = 2000   # safety cap for a traceback that never ends
KILLED_WINDOW = 20         # lines after "Killed" in which exit-137 context counts
TEXT_MAX = 300
TRUNCATION_MIN_ROWS = 20
TRUNCATION_SHARE = 0.05
TRUNCATION_EARLY_MIN = 3   # while streaming, need at least this many truncated rows
TRAINER_CLIPPED_SHARE = 0.25  # share of logged trainer steps with half the completions clipped
LINE_MAX = 1 << 20         # a longer record is checked in pieces of this size ...
LINE_OVERLAP = 64 << 10    # ... overlapping by this much
MAP_BYTES = 64 << 20       # scan_file maps this much of the file at a time

_LABEL_RX = P.compile_label_patterns()
_LABEL_ORDER = tuple(P.LABEL_PATTERNS)
_LABEL_ANCHORS = {k: frozenset(v) for k, v in P.LABEL_ANCHORS.items()}
_ALL_LABEL_ANCHORS = tuple(sorted(set().union(*_LABEL_ANCHORS.values())))
_FAMILY_LABEL = tuple(f.label for f in P.FAMILIES)
_LABEL_FAMILIES = {lb: tuple(i for i, f in enumerate(P.FAMILIES) if f.label == lb) for lb in _LABEL_ORDER}
_FAMILY_RX: dict[int, tuple] = {}  # family index -> (pattern, exclude), compiled on a label's first match
class _Compiled:
    """The scanner's structural regexes, compiled on first use: a healthy log scanned with
    Hyperscan may need none of them, and compiling all costs ~13 ms of every process start."""

    _SOURCES = {
        "header": P.TB_HEADER,
        "frame": P.TB_FRAME,
        "exc": P.TB_EXC,
        "struct": P.TB_STRUCTURAL,
        "exit": P.TB_EXIT,
        "progress": P.TB_PROGRESS,
        "errorish": P.TB_ERRORISH,
        "killed": P.KILLED,
        "exit137": P.EXIT137,
        "finish": P.FINISH_REASON,
        "tokens": P.TOKEN_COUNT,
        "clipped": P.CLIPPED_RATIO,
        "terminated": P.TERMINATED_LENGTH,
        "context_trunc": P.CONTEXT_TRUNCATION,
        "tokenizer": P.TOKENIZER_OVERLENGTH,
        # issue 30: torchrun's per-worker exit codes, chained exceptions, a bar before a traceback
        "worker_exit": rb"\bexitcode\s*:\s*(-?\d+)",
        "chained": rb"During handling of the above exception|The above exception was the direct cause",
        "bar_end": rb".*(?:it/s|s/it|\?it/s)\]",
    }

    def __getattr__(self, name: str) -> "re.Pattern[bytes]":
        rx = re.compile(self._SOURCES[name])
        setattr(self, name, rx)
        return rx


_RX = _Compiled()
#: The exception torchrun (torch.distributed.elastic) raises when any worker exits non-zero.
_LAUNCHER_SUMMARY = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"
#: runjob_core.job.RESUME_EXIT_CODE: saved on the time-limit warning, resume me.
RESUME_EXIT_CODE = 75


def _without_progress_bar(prefix: bytes) -> bytes:
    """A traceback header's prefix without the progress bar drawn before it on the same line
    (``\r``-redrawn, no newline): what stays is the per-process label (``[rank1]:``) that the
    following lines of the traceback carry too."""
    prefix = prefix.rsplit(b"\r", 1)[-1]
    bar = _RX.bar_end.match(prefix)
    return prefix[bar.end():] if bar is not None else prefix


_DIGITS = bytes.maketrans(b"123456789", b"000000000")


@dataclass(frozen=True)
class Hit:
    label: str        # one of _patterns.LABELS
    line: int         # 1-based line number in the stream (0 for scheduler-state findings)
    message: str      # one line: what happened and what to do
    severity: str     # "error" | "warning" | "info"
    action: str       # "stop" | "resume" | "retry" | "warn" | "continue"
    text: str         # the log line (stripped, at most 300 chars)


def _decode(rec: bytes, focus: int = 0) -> str:
    s = rec.decode("utf-8", "replace").strip()
    if len(s) > TEXT_MAX:
        start = max(0, min(focus - 100, len(s) - TEXT_MAX)) if focus else 0
        s = s[start:start + TEXT_MAX].strip()
    return s


def _make_hit(label: str, line: int, text: str, *, caught: bool = False, detail: str = "",
              kind: str | None = None, evidence: str = "") -> Hit:
    severity, action, title, advice = P.ALL_LABELS[label]
    if kind is not None:                # a label with several kinds of finding
        title, advice, *how = P.KINDS[kind]
        if how:
            severity, action = how
    if caught:
        severity, action = "warning", "continue"
    msg = f"{title}"
    if detail:
        msg += f" ({detail})"
    if line:
        msg += f" at line {line}"
    if evidence:
        msg += f" (evidence: {evidence})"
    msg += f": {advice}."
    if caught:
        msg += " It was logged inside a traceback that the job recovered from, so it is only a warning."
    return Hit(label, line, msg, severity, action, text)


@dataclass
class _Event:
    """A pending Python traceback."""
    start_line: int
    prefix: bytes
    exc_max_indent: int
    headless: bool
    phase: str = "body"                 # "body" until the exception line, then "after"
    exc_line: int = 0
    exc_text: str = ""
    n_after: int = 0
    n_progress: int = 0
    n_records: int = 0
    exit_seen: bool = False
    explained: bool = False
    chained: bool = False               # "During handling of the above exception..." seen after it
    worker_exits: list = field(default_factory=list)  # torchrun's summary: each failed worker's exit code
    held: list = field(default_factory=list)
    cause: tuple | None = None          # (line, text): the first exception of a run of tracebacks

    def carry_from(self, first: "_Event") -> None:
        """Continue *first*'s failure in this (the next process's) traceback."""
        self.cause = first.cause or (first.exc_line, first.exc_text)
        self.held = first.held + self.held
        self.explained = self.explained or first.explained
        self.worker_exits = first.worker_exits + self.worker_exits


class LogScanner:
    """Incremental scanner; feed it arbitrary byte chunks, then call finish()."""

    def __init__(self, *, max_tokens: int | None = None, start_line: int = 0, engine: str | None = None):
        self.max_tokens = max_tokens
        self.engine = _engine.resolve(engine)
        # scan_file over a mapped file: the newlines of stretches with nothing to inspect are
        # only counted if a line number is asked for (a healthy log needs none)
        self._lazy: int | None = None    # the file's descriptor, where the feeds are its maps
        self._base = 0                   # the file offset of the map being fed
        self._gaps: list[tuple[int, int]] = []  # file ranges whose newlines are not in _line yet
        self._start_line = start_line
        self._line = start_line          # '\n' seen before the current partial record
        self._partial = b""              # the open record (its last LINE_MAX bytes at most)
        self._long = False               # the open record was checked in pieces already
        self._finished = False
        self._last_match: dict[str, int] = {}
        self._last_specific = None       # line of the latest specific-label match
        self._event: _Event | None = None
        self._killed: tuple[int, bytes] | None = None
        self._fr = [0, 0]                # finish_reason rows: total, truncated
        self._tok = [0, 0]               # token-count rows: total, at max_tokens
        self._clip = [0, 0]              # trainer metric rows: total, every completion clipped
        self._clip_half = [0, 0]         # trainer metric rows: total, half or more of the completions clipped
        self._clip_half_done = False     # the note about many clipped steps was given
        self._trunc_last: tuple[int, str] | None = None
        self._trunc_done = False
        self._out: list[Hit] = []
        anchors = list(P.ANCHORS)
        if max_tokens:
            anchors += list(P.TOKEN_ANCHORS)
        self._anchors = tuple(anchors)
        # the bytes.find engine keeps a search plan; Hyperscan needs no state here
        self._finder = _engine.BytesFind(self._anchors) if self.engine == "python" else None

    # ------------------------------------------------------------- public
    @property
    def lines_seen(self) -> int:
        """Complete lines seen so far (including ``start_line``)."""
        self._count_gap()
        return self._line

    def _count_gap(self) -> None:
        if self._gaps:
            gaps, self._gaps = self._gaps, []
            self._line += sum(_file_newlines(self._lazy, lo, hi) for lo, hi in gaps)

    def feed(self, data: bytes | bytearray | mmap.mmap) -> list[Hit]:
        """Scan the next chunk (any size; a partial last line is kept for the next call)."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        if not data:
            return []
        if not isinstance(data, (bytes, bytearray, mmap.mmap)):
            data = bytes(data)
        last = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if last < 0:
            self._grow(data, 0, len(data))
            return self._take()
        n = data.find(b"\n", 0, last + 1)
        r = data.find(b"\r", 0, last + 1)
        first = n if r < 0 else (r if n < 0 else min(n, r))
        self._grow(data, 0, first)
        self._end_record()
        if data[first] == 10:
            self._line += 1
        if first + 1 < last + 1:
            self._scan_region(data, first + 1, last + 1)
        self._grow(data, last + 1, len(data))
        return self._take()

    def finish(self) -> list[Hit]:
        if self._finished:
            return []
        if self._partial or self._long:
            self._end_record()
            self._line += 1
        if self._event is not None:
            self._decide()
        self._killed = None
        self._truncation_check(final=True)
        self._finished = True
        return self._take()

    def settle(self) -> list[Hit]:
        """The log went quiet: decide a pending traceback now instead of waiting for more lines.

        A live monitor calls this when a job has printed nothing for a while: a job that
        printed an exception and then fell silent has not recovered from it.
        """
        if self._event is not None and self._event.phase == "after":
            self._decide()
        return self._take()

    # ------------------------------------------------------------- the open record
    def _grow(self, data, lo: int, hi: int) -> None:
        """Add data[lo:hi] (no line end in it) to the open record; one that reaches LINE_MAX
        is checked piece by piece as it grows and only its tail is kept."""
        step = LINE_MAX - LINE_OVERLAP
        while hi - lo >= LINE_MAX - len(self._partial):
            take = LINE_MAX - len(self._partial)
            piece = self._partial + data[lo:lo + take]
            lo += take
            self._piece(piece, first=not self._long, own=step)
            self._long = True
            self._partial = piece[step:]
        if hi > lo:
            self._partial += data[lo:hi]

    def _end_record(self) -> None:
        """The open record ended (a line end, or the end of the stream)."""
        rec, self._partial = self._partial, b""
        long, self._long = self._long, False
        if long:
            self._piece(rec, first=False, own=None)
        elif not self._gaps:
            self._record(rec, self._line + 1)
        else:
            # with newlines still uncounted, an idle scanner skips a record without anchors
            # (it would be a no-op) rather than count the file's newlines for its line number
            self._piece(rec, first=True, own=None)

    def _piece(self, rec: bytes, *, first: bool, own: int | None) -> None:
        """Inspect *rec* (a piece of the open record) if it can change anything."""
        if (self._event is None and self._killed is None
                and not self._candidates(rec + b"\n", 0, len(rec) + 1)):
            return
        self._count_gap()
        self._record(rec, self._line + 1, structure=first, own=own)

    def _inspect(self, buf, lo: int, hi: int, families=None) -> None:
        """Inspect the record buf[lo:hi] of line ``_line + 1``; a long one in pieces."""
        if hi - lo <= LINE_MAX:
            self._record(buf[lo:hi], self._line + 1, families)
            return
        step = LINE_MAX - LINE_OVERLAP
        for at in range(lo, hi, step):
            end = min(at + LINE_MAX, hi)
            if at == lo:
                self._record(buf[at:end], self._line + 1, structure=True, own=step)
            else:
                self._piece(buf[at:end], first=False, own=None if end == hi else step)
            if end == hi:
                break

    # ------------------------------------------------------------- regions
    def _take(self) -> list[Hit]:
        out, self._out = self._out, []
        return out

    def _busy(self, next_line: int) -> bool:
        if self._event is not None:
            return True
        if self._killed is not None:
            if next_line > self._killed[0] + KILLED_WINDOW:
                self._killed = None
                return False
            return True
        return False

    def _sequential(self, buf: bytes, pos: int, hi: int, until_idle: bool) -> int:
        """Process whole records from pos (buf[hi-1] is a terminator)."""
        find = buf.find
        while pos < hi:
            n = find(b"\n", pos, hi)
            if n < 0:
                n = hi
            r = find(b"\r", pos, n)
            end = r if r >= 0 else n
            if end > pos:
                self._inspect(buf, pos, end)
            if buf[end] == 10:
                self._line += 1
            pos = end + 1
            if until_idle and not self._busy(self._line + 1):
                break
        return pos

    def _scan_region(self, buf: bytes, lo: int, hi: int) -> None:
        if self._finder is None:
            cands, ids = _engine.family_candidates(buf, lo, hi, bool(self.max_tokens))
        else:
            cands, ids = self._finder.candidates(buf, lo, hi), None
        pos = lo
        ci = 0
        nc = len(cands)
        find = buf.find
        rfind = buf.rfind
        while pos < hi:
            if self._busy(self._line + 1):
                pos = self._sequential(buf, pos, hi, until_idle=True)
                continue
            while ci < nc and cands[ci] < pos:
                ci += 1
            if ci >= nc:
                if self._lazy is not None:
                    self._gaps.append((self._base + pos, self._base + hi))
                else:
                    self._line += _newlines(buf, pos, hi)
                return
            c = cands[ci]
            rs = max(rfind(b"\n", pos, c), rfind(b"\r", pos, c)) + 1
            if rs < pos:
                rs = pos
            n = find(b"\n", c, hi)
            if n < 0:
                n = hi
            r = find(b"\r", c, n)
            end = r if r >= 0 else n
            if rs > pos:
                self._line += _newlines(buf, pos, rs)
            families = None
            if ids is not None:
                families = set()
                while ci < nc and cands[ci] <= end:      # every match that ends in this record
                    families.add(ids[ci])
                    ci += 1
            self._count_gap()
            self._inspect(buf, rs, end, families)
            if buf[end] == 10:
                self._line += 1
            pos = end + 1

    # ------------------------------------------------------------- prefilter
    def _candidates(self, buf: bytes, lo: int, hi: int) -> list[int]:
        """Positions inside the records worth inspecting in buf[lo:hi] (buf[hi-1] ends a record)."""
        if self._finder is None:
            return _engine.family_candidates(buf, lo, hi, bool(self.max_tokens))[0]
        return self._finder.candidates(buf, lo, hi)

    # ------------------------------------------------------------- records
    def _record(self, rec: bytes, line: int, families=None, *, structure: bool = True,
                own: int | None = None) -> None:
        """Inspect one record.  *families*: the family ids Hyperscan matched in it (a superset
        of the families that really match); None means unknown (check every label by anchors).
        A piece of a long record: *structure* False skips the traceback and ``Killed`` steps
        (they saw the first piece), and completion rows starting at *own* or later are left to
        the next piece."""
        if type(rec) is not bytes:
            rec = bytes(rec)        # a slice of a reused bytearray chunk
        if not rec.strip():
            return
        if self._killed is not None and line > self._killed[0] + KILLED_WINDOW:
            self._killed = None
        matched = []
        if families is not None:
            named = {_FAMILY_LABEL[i] for i in families if i < len(_FAMILY_LABEL)}
            labels = [lb for lb in _LABEL_ORDER if lb in named] if named else ()
        else:
            present = {a for a in _ALL_LABEL_ANCHORS if a in rec}
            labels = [lb for lb in _LABEL_ORDER if not present.isdisjoint(_LABEL_ANCHORS[lb])] if present else ()
        for label in labels:
            m = _LABEL_RX[label].search(rec)
            if m is None:
                continue
            family = _matching_family(label, rec)
            if family is not None:
                matched.append((label, m.start(), family))
        for label, at, family in matched:
            f = P.FAMILIES[family]
            self._on_label(label, line, _decode(rec, at), evidence=f.evidence, kind=f.kind)
        if b"runcat" in rec:
            m = _RX.context_trunc.search(rec)
            if m is not None:
                self._context_truncated(line, _decode(rec, m.start()))
        if b"Token indices" in rec:
            m = _RX.tokenizer.search(rec)
            if m is not None:
                self._tokenizer_overlength(line, _decode(rec, m.start()), m)
        if structure:
            self._traceback_step(rec, line, bool(matched))
            self._killed_step(rec, line, any(m[0] == "host_oom" for m in matched))
        self._truncation_step(rec, line, own)

    def _on_label(self, label: str, line: int, text: str, **how) -> None:
        last = self._last_match.get(label)
        self._last_match[label] = max(line, last or 0)
        self._last_specific = line if self._last_specific is None else max(self._last_specific, line)
        ev = self._event
        dup = last is not None and abs(line - last) <= BURST_LINES
        if ev is not None:
            ev.explained = True
            if ev.phase == "body":
                if not dup:
                    ev.held.append((label, line, text, how))
                return
            # after the exception line: an independent event; a fatal one decides the traceback
            if P.ALL_LABELS[label][0] == "error":
                self._decide(force_fatal=True)
        if not dup:
            if label == "host_oom":  # an OOM record explains a SIGKILL reported just before it
                self._out = [h for h in self._out if h.label != "killed"]
            self._out.append(_make_hit(label, line, text, **how))

    # ------------------------------------------------------------- traceback
    def _strip_prefix(self, rec: bytes, prefix: bytes) -> bytes:
        if not prefix:
            return rec
        if rec.startswith(prefix):
            return rec[len(prefix):]
        head = rec[:len(prefix)]
        if len(head) == len(prefix) and head.translate(_DIGITS) == prefix.translate(_DIGITS):
            return rec[len(prefix):]
        return rec

    def _traceback_step(self, rec: bytes, line: int, had_label: bool) -> None:
        ev = self._event
        hdr = _RX.header.search(rec)
        if ev is None:
            if hdr is not None:
                cleaned = _without_progress_bar(rec[:hdr.start()])
                prefix = cleaned.rstrip()
                content = cleaned[len(prefix):] + rec[hdr.start():]
                indent = len(content) - len(content.lstrip())
                self._open_event(line, prefix, indent, headless=False)
                return
            fr = _RX.frame.search(rec)
            if fr is not None:
                prefix = rec[:fr.start()].rstrip()
                content = rec[len(prefix):]
                indent = len(content) - len(content.lstrip())
                self._open_event(line, prefix, max(0, indent - 1), headless=True)
            return
        ev.n_records += 1
        if ev.phase == "after" and _RX.chained.search(rec) is not None:
            ev.chained = True
        if hdr is not None:
            if ev.exc_line and not ev.chained:
                # Another process's traceback (a torchrun rank that died of the first one's
                # exit): a new event with its own prefix, but still one failure whose cause is
                # the first exception, decided once, later, as a single traceback would be
                # (progress after it still means it was caught: no stop for logged retries).
                self._event = None
                self._traceback_step(rec, line, had_label)
                if self._event is not None:
                    self._event.carry_from(ev)
                return
            ev.phase, ev.chained = "body", False
            return
        content = self._strip_prefix(rec, ev.prefix)
        body = content.lstrip()
        indent = len(content) - len(body)
        if _RX.frame.match(body) is not None or _RX.struct.match(body) is not None:
            if ev.n_records > EVENT_MAX_RECORDS:
                self._decide()
            return
        if indent <= ev.exc_max_indent and _RX.exc.match(body) is not None:
            ev.exc_line = line
            ev.exc_text = _decode(body)
            ev.phase = "after"
            return
        if ev.phase == "body" and indent > ev.exc_max_indent and not (
                _RX.progress.search(rec) is not None and _RX.errorish.search(rec) is None):
            if ev.n_records > EVENT_MAX_RECORDS:
                self._decide()
            return                                  # code line of a frame
        # a line that is not part of the traceback text: lookahead
        if ev.exc_text.startswith(_LAUNCHER_SUMMARY):
            # torchrun's summary lists each failed worker's exit code: read them all first.
            code = _RX.worker_exit.search(rec)
            if code is not None:
                ev.worker_exits.append(int(code.group(1)))
            ev.n_after += 1
            if ev.n_after >= LOOKAHEAD_LINES or ev.n_records > EVENT_MAX_RECORDS:
                self._decide()
            return
        if _RX.exit.search(rec) is not None:
            ev.exit_seen = True
            self._decide()
            return
        if _RX.progress.search(rec) is not None and _RX.errorish.search(rec) is None:
            ev.n_progress += 1
        ev.n_after += 1
        if ev.n_after >= LOOKAHEAD_LINES or ev.n_records > EVENT_MAX_RECORDS:
            self._decide()

    def _open_event(self, line: int, prefix: bytes, exc_max_indent: int, headless: bool) -> None:
        ev = _Event(line, prefix, exc_max_indent, headless)
        if self._last_specific is not None and line - self._last_specific <= BURST_LINES:
            ev.explained = True
        self._event = ev

    def _decide(self, force_fatal: bool = False) -> None:
        ev = self._event
        if ev is None:
            return
        self._event = None
        caught = (not force_fatal) and (not ev.exit_seen) and ev.n_progress >= PROGRESS_MIN
        for label, line, text, how in ev.held:
            self._out.append(_make_hit(label, line, text, caught=caught, **how))
        if ev.held or ev.explained:
            return
        if ev.worker_exits and set(ev.worker_exits) == {RESUME_EXIT_CODE}:
            # torchrun's summary of workers that all saved on the time-limit warning and
            # exited 75: no error, and a "stop" would refuse the resume the job asked for.
            return
        line, exc = ev.cause or (ev.exc_line or ev.start_line, ev.exc_text)
        last = self._last_match.get("traceback")
        self._last_match["traceback"] = line
        if last is not None and line - last <= BURST_LINES:
            return
        exc = exc or "(no final exception line)"
        if caught:
            msg = (f"A Python traceback was logged at line {line} but the job kept making progress "
                   f"(caught and retried?): {exc}. No action needed unless it keeps repeating.")
            hit = Hit("traceback", line, msg, "warning", "continue", exc[:TEXT_MAX])
        else:
            msg = f"Uncaught Python exception at line {line}: {exc}. Fix the cause and resubmit."
            hit = Hit("traceback", line, msg, "error", "stop", exc[:TEXT_MAX])
        self._out.append(hit)

    # ------------------------------------------------------------- killed / 137
    def _killed_step(self, rec: bytes, line: int, host_oom_here: bool) -> None:
        # "Killed" beside exit 137 says SIGKILL, not who sent it: without an OOM record
        # (host_oom's families) it is a kill ("killed"), and an OOM record wins over it.
        if host_oom_here:
            self._killed = None
            return
        if _RX.killed.search(rec) is not None:
            if _RX.exit137.search(rec) is not None:
                self._killed = None
                self._on_kill(line, _decode(rec))
            else:
                self._killed = (line, rec)
            return
        if self._killed is not None and _RX.exit137.search(rec) is not None:
            kline, krec = self._killed
            self._killed = None
            self._on_kill(kline, _decode(krec))

    def _on_kill(self, line: int, text: str) -> None:
        if "host_oom" not in self._last_match:
            self._on_label("killed", line, text)

    def labels_seen(self) -> set[str]:
        """Every label matched so far in this log."""
        return set(self._last_match)

    # ------------------------------------------------------------- truncation
    def _context_truncated(self, line: int, text: str) -> None:
        # A warning, not an explanation of a later crash: it does not touch the traceback state.
        last = self._last_match.get("truncation:context")
        self._last_match["truncation:context"] = line
        if last is None or line - last > BURST_LINES:
            self._out.append(_make_hit("truncation", line, text, kind="context",
                                       evidence="the eval harness said it cut the context"))

    def _tokenizer_overlength(self, line: int, text: str, m) -> None:
        # once per run is enough: transformers prints it once per tokenizer
        if "truncation:tokenizer" in self._last_match:
            return
        self._last_match["truncation:tokenizer"] = line
        self._out.append(_make_hit("truncation", line, text, kind="tokenizer",
                                   detail=f"{int(m.group(1))} > {int(m.group(2))} tokens",
                                   evidence="transformers' tokenizer over-length warning"))

    def _truncation_step(self, rec: bytes, line: int, own: int | None = None) -> None:
        if self._trunc_done:
            return
        counted = False
        end = len(rec) if own is None else own
        if b"finish_reason" in rec:
            for m in _RX.finish.finditer(rec):
                if m.start() >= end:
                    break
                v = m.group(1).lower()
                if v in P.NULL_REASONS:
                    continue
                counted = True
                self._fr[0] += 1
                if v in P.TRUNCATED_REASONS:
                    self._fr[1] += 1
                    self._trunc_last = (line, _decode(rec))
        if self.max_tokens:
            for m in _RX.tokens.finditer(rec):
                if m.start() >= end:
                    break
                counted = True
                self._tok[0] += 1
                if int(m.group(1)) >= self.max_tokens:
                    self._tok[1] += 1
                    self._trunc_last = (line, _decode(rec))
        if b"clip" in rec or b"terminated_length" in rec:
            ratios = [float(m.group(1)) for m in _RX.clipped.finditer(rec) if m.start() < end]
            lengths = [float(m.group(1)) for m in _RX.terminated.finditer(rec) if m.start() < end]
            if ratios or lengths:
                counted = True
                self._clip[0] += 1
                self._clip_half[0] += 1
                every = any(r >= 1.0 for r in ratios) or any(n == 0.0 for n in lengths)
                if every:
                    self._clip[1] += 1
                if every or any(r >= P.CLIPPED_STEP_SHARE for r in ratios):
                    self._clip_half[1] += 1
                    self._trunc_last = (line, _decode(rec))
        if counted:
            self._truncation_check(final=False, line=line, rec=rec)

    def _truncation_check(self, final: bool, line: int = 0, rec: bytes = b"") -> None:
        if self._trunc_done:
            return
        clip_evidence = ("the trainer's clipped-completion metrics (TRL completions/clipped_ratio, "
                         "mean_terminated_length; verl response_length/clip_ratio)")
        kinds = (
            (self._fr, ("completion", "completions"), "with finish_reason=length", "rows", TRUNCATION_SHARE,
             "completion rows ending with finish_reason=length"),
            (self._tok, ("completion", "completions"), f"with output tokens >= max_tokens={self.max_tokens}", "rows",
             TRUNCATION_SHARE, "completion rows whose output token count reached max_tokens"),
            (self._clip, ("logged step", "logged steps"), "with every completion clipped (clipped_ratio=1 / "
             "mean_terminated_length=0)", "trainer", TRUNCATION_SHARE, clip_evidence),
            # weaker evidence, a note (action warn) that does not end the truncation check
            (self._clip_half if not self._clip_half_done else (0, 0), ("logged step", "logged steps"),
             f"with at least {P.CLIPPED_STEP_SHARE:.0%} of the completions clipped", "trainer_share",
             TRAINER_CLIPPED_SHARE, clip_evidence),
        )
        for (n, k), (one, rows), what, kind, share, evidence in kinds:
            if n >= TRUNCATION_MIN_ROWS:
                if k / n < share or (not final and k < TRUNCATION_EARLY_MIN):
                    continue
            elif not (final and n and k == n):
                continue        # a handful of rows: only when all of them are cut off, decided at the end
            if final:
                self._count_gap()
                line, text = self._trunc_last or (self._line, "")
            else:
                text = _decode(rec)
            if n >= TRUNCATION_MIN_ROWS:
                detail = f"{k} of {n} {rows} ({100.0 * k / n:.1f}%) {what}"
            else:
                detail = f"the only {one} seen, {what}" if n == 1 else f"all {n} {rows} seen {what}"
            self._out.append(_make_hit("truncation", line, text, detail=detail + ("" if final else " so far"),
                                       kind=kind, evidence=evidence))
            if kind == "trainer_share":
                self._clip_half_done = True
                continue
            self._trunc_done = True
            return


def _matching_family(label: str, rec: bytes) -> int | None:
    """The first family of *label* whose patterns match *rec* and whose exclude does not
    (runs only on records where the label's combined pattern matched)."""
    for i in _LABEL_FAMILIES[label]:
        rx = _FAMILY_RX.get(i)
        if rx is None:
            f = P.FAMILIES[i]
            rx = _FAMILY_RX[i] = (re.compile(b"|".join(b"(?:" + p + b")" for p in f.patterns)),
                                  re.compile(f.exclude) if f.exclude else None)
        if rx[0].search(rec) is not None and (rx[1] is None or rx[1].search(rec) is None):
            return i
    return None


def _newlines(buf, lo: int, hi: int) -> int:
    if type(buf) is not mmap.mmap:
        return buf.count(b"\n", lo, hi)
    n = 0
    for at in range(lo, hi, 16 << 20):          # an mmap has no count(): copy slice by slice
        n += buf[at:min(hi, at + (16 << 20))].count(b"\n")
    return n


class _ReferenceScanner(LogScanner):
    """Slow path for tests: inspects every record, no prefilter."""

    def _scan_region(self, buf: bytes, lo: int, hi: int) -> None:
        self._sequential(buf, lo, hi, until_idle=False)


def scan_file(path, *, max_tokens: int | None = None, chunk_size: int = 8 << 20,
              engine: str | None = None) -> list[Hit]:
    """Scan a whole file (in chunks) and return all hits."""
    scanner = LogScanner(max_tokens=max_tokens, engine=engine)
    hits: list[Hit] = []
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if scanner.engine == "hyperscan" and size:
            # Hyperscan over the page cache, MAP_BYTES at a time: no copies, and what is mapped
            # is bounded; the line count of a stretch without findings is read on demand only
            scanner._lazy = f.fileno()
            for at in range(0, size, MAP_BYTES):
                length = min(MAP_BYTES, size - at)
                mapped = _map(f, at, length)
                if mapped is None:
                    break           # not a regular file after all: read the rest
                with mapped:
                    scanner._base = at
                    hits.extend(scanner.feed(mapped))
                f.seek(at + length)
            else:
                hits.extend(scanner.finish())
                return hits
        while True:
            scanner._base = f.tell()
            chunk = f.read(chunk_size)
            if not chunk:
                break
            hits.extend(scanner.feed(chunk))
        hits.extend(scanner.finish())
    return hits


def _map(f, offset: int, length: int):
    """Part of the file memory-mapped read-only, or None where that is not possible (a pipe)."""
    try:
        return mmap.mmap(f.fileno(), length, offset=offset, access=mmap.ACCESS_READ)
    except (ValueError, OSError):
        return None


def _file_newlines(fd: int, lo: int, hi: int) -> int:
    n = 0
    for at in range(lo, hi, 16 << 20):
        n += os.pread(fd, min(hi - at, 16 << 20), at).count(b"\n")
    return n


_STATE_LABELS = {
    "OUT_OF_MEMORY": "host_oom",
    "OOM": "host_oom",
    "TIMEOUT": "time_limit",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "node_fail",
}


def findings_for_state(state: str, exit_code: int | None) -> list[Hit]:
    """Findings from the scheduler's final job state (sacct/squeue style strings)."""
    raw = (state or "").strip()
    norm = raw.upper().split()[0].rstrip("+") if raw else ""
    text = f"state={raw} exit_code={exit_code}"
    label = _STATE_LABELS.get(norm)
    if label is None and norm == "FAILED" and exit_code in (137, -9):
        label = "killed"  # SIGKILL; an OOM would have said OUT_OF_MEMORY (and the log, oom-kill)
    if label is None:
        return []
    return [_make_hit(label, 0, text, detail=f"scheduler state {norm}" + (f", exit code {exit_code}" if exit_code is not None else ""))]
