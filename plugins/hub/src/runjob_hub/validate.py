"""Sanity checks over a results file (JSONL or parquet) before it is trusted or published.

:func:`validate_results` reads the whole file once and reports what usually goes wrong with
LLM evaluation output: truncated generations, null or empty responses, missing fields,
duplicate example ids, constant or out-of-range scores. Each finding is a :class:`Problem`;
``error`` means the results are not trustworthy as they are, ``warning`` means "look at this".

Two engines give the same report:

* ``pyarrow`` (used when pyarrow is importable and the file is under 4 GiB): reads the file with
  ``pyarrow.json.read_json`` / ``pyarrow.parquet`` and runs every check as a vectorised compute
  kernel, so the cost is close to the cost of reading the file.
* ``python`` (stdlib only): streams the file line by line with ``json.loads``. About 3x slower,
  constant memory apart from the set of keys. Also the fallback when pyarrow cannot parse the
  file (malformed lines, a column whose JSON type changes between rows), and the only engine
  that reports malformed lines with their line numbers.

Rows are numbered from 1 in file order, skipping blank lines ("row 12" is the 12th record).
"""

from __future__ import annotations

import json
import json.scanner
import math
from pathlib import Path
from typing import Any

import attrs

__all__ = ["Problem", "ValidationReport", "validate_results"]

RESPONSE_FIELDS = ("response", "output", "completion", "generation", "text", "generated_text",
                   "model_response", "model_output", "prediction")
SCORE_FIELDS = ("score", "correct", "is_correct", "reward", "accuracy", "acc", "exact_match", "passed", "pass")
TOKEN_FIELDS = ("num_output_tokens", "output_tokens", "completion_tokens", "num_completion_tokens",
                "num_generated_tokens", "generated_tokens", "usage.completion_tokens", "usage.output_tokens")
FINISH_FIELDS = ("finish_reason", "stop_reason")
KEY_FALLBACKS = ("id", "idx", "index", "example_id", "sample_id", "question_id", "task_id", "doc_id", "uid")
TRUNCATION_REASONS = ("length", "max_tokens")

#: a response at least this many characters long that ends in a letter or a comma looks cut off
CUT_MIN_CHARS = 100
#: ...and the "cut mid-sentence" warning needs at least this share of such responses
CUT_SHARE = 0.3
CUT_MIN_ROWS = 5
#: over this size the python engine streams instead of loading the table into memory
ARROW_MAX_BYTES = 4 << 30
N_EXAMPLES = 3


@attrs.frozen
class Problem:
    """One finding. ``label`` is stable (``empty-field:<column>`` carries the column name)."""

    label: str
    severity: str  # "error" | "warning"
    message: str
    count: int = 0
    examples: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen
class ValidationReport:
    path: Path
    rows: int
    problems: tuple[Problem, ...] = attrs.field(converter=tuple)
    columns: dict[str, str]  # column -> inferred type: string|int|float|bool|object|list|null|mixed(a|b)
    token_range: tuple[int, int] | None = None  # observed output-token counts (min, max)
    score_range: tuple[float, float] | None = None  # observed scores (min, max)
    score_mean: float | None = None
    response_field: str | None = None
    score_field: str | None = None
    token_field: str | None = None
    key: str | None = None
    engine: str = "python"

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    def problem(self, label: str) -> Problem | None:
        """The problem with this label, if any."""
        return next((p for p in self.problems if p.label == label), None)

    def summary(self) -> str:
        """A few human-readable lines (for the CLI)."""
        head = f"{self.path.name}: {self.rows} rows"
        if self.score_range is not None:
            head += f", {self.score_field} {_num(self.score_range[0])}..{_num(self.score_range[1])}"
            if self.score_mean is not None:
                head += f" (mean {self.score_mean:.4g})"
        if self.token_range is not None:
            head += f", {self.token_field} {self.token_range[0]}..{self.token_range[1]}"
        lines = [head]
        for p in self.problems:
            ex = f" (e.g. {', '.join(p.examples)})" if p.examples else ""
            lines.append(f"  {p.severity}: {p.message}{ex}")
        if not self.problems:
            lines.append("  no problems found")
        return "\n".join(lines)


def validate_results(
    path: Path,
    *,
    max_tokens: int | None = None,
    score_range: tuple[float, float] | None = None,
    key: str = "id",
    response_field: str | None = None,
    score_field: str | None = None,
    engine: str = "auto",
) -> ValidationReport:
    """Check a results file. ``engine`` is ``"auto"``, ``"pyarrow"`` or ``"python"``.

    Raises :class:`~runjob_core.errors.RunjobError` if the file cannot be read at all (missing,
    parquet without pyarrow, a JSON document that is neither JSON Lines nor an array of objects).
    """
    from runjob_core.errors import RunjobError

    path = Path(path)
    if not path.is_file():
        raise RunjobError(f"results file not found: {path}")
    if engine not in ("auto", "pyarrow", "python"):
        raise ValueError(f"engine must be auto, pyarrow or python, not {engine!r}")
    if score_range is not None and not score_range[0] <= score_range[1]:
        raise ValueError(f"score_range must be (low, high), got {score_range!r}")
    params = _Params(max_tokens, score_range, key, response_field, score_field)
    is_parquet = path.suffix.lower() == ".parquet"
    if is_parquet or engine == "pyarrow" or (engine == "auto" and path.stat().st_size <= ARROW_MAX_BYTES):
        table = _read_arrow(path, required=is_parquet or engine == "pyarrow")
        if table is not None:
            return _build(path, _scan_arrow(table, params), params, "pyarrow")
    return _build(path, _scan_python(path, params), params, "python")


# ----------------------------------------------------------------------------------------------
# shared


@attrs.define
class _Params:
    max_tokens: int | None
    score_range: tuple[float, float] | None
    key: str
    response_field: str | None
    score_field: str | None


@attrs.define
class _Count:
    n: int = 0
    rows: list[int] = attrs.field(factory=list)  # first few row indices (0-based)
    keys: list[Any] = attrs.field(factory=list)  # their key values (None if unknown)

    def add(self, i: int, kv: Any = None) -> None:
        self.n += 1
        if len(self.rows) < N_EXAMPLES:
            self.rows.append(i)
            self.keys.append(kv)


@attrs.define
class _Facts:
    """What an engine measured; :func:`_build` turns it into problems."""

    rows: int = 0
    columns: dict[str, str] = attrs.field(factory=dict)
    key: str | None = None
    response: str | None = None
    score: str | None = None
    tokens: str | None = None
    finish: str | None = None
    malformed: _Count = attrs.field(factory=_Count)
    malformed_lines: list[str] = attrs.field(factory=list)
    empty: dict[str, _Count] = attrs.field(factory=dict)  # generic null/missing/"" per column
    null_response: _Count = attrs.field(factory=_Count)
    empty_response: _Count = attrs.field(factory=_Count)
    cut_checked: bool = False
    cut_eligible: int = 0
    cut: _Count = attrs.field(factory=_Count)
    truncated: _Count = attrs.field(factory=_Count)
    finish_length: int = 0
    tokens_at_max: int = 0
    tokens_over: _Count = attrs.field(factory=_Count)
    token_min: float | None = None
    token_max: float | None = None
    score_numeric: bool = True
    score_n: int = 0
    score_min: float | None = None
    score_max: float | None = None
    score_sum: float = 0.0
    score_non_numeric: _Count = attrs.field(factory=_Count)
    score_out: _Count = attrs.field(factory=_Count)
    dup: int = 0
    dup_examples: list[str] = attrs.field(factory=list)


def _pick(columns: dict[str, str], explicit: str | None, candidates: tuple[str, ...]) -> str | None:
    if explicit:
        return explicit if explicit in columns else None
    return next((c for c in candidates if c in columns), None)


def _pick_key(columns: dict[str, str], key: str) -> str | None:
    if key in columns:
        return key
    if key == "id":
        return next((c for c in KEY_FALLBACKS if c in columns), None)
    return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.1f}%" if total else "0%"


def _build(path: Path, f: _Facts, p: _Params, engine: str) -> ValidationReport:
    probs: list[Problem] = []

    def ex(c: _Count) -> tuple[str, ...]:
        return tuple(f"row {i + 1}" + (f" ({f.key}={kv})" if kv is not None else "")
                     for i, kv in zip(c.rows, c.keys))

    def add(label: str, sev: str, msg: str, count: int = 0, examples: tuple[str, ...] = ()) -> None:
        probs.append(Problem(label, sev, msg, count, examples))

    n = f.rows
    if f.malformed.n:
        add("malformed-rows", "error",
            f"{f.malformed.n} line(s) are not JSON objects", f.malformed.n, tuple(f.malformed_lines))
    if n == 0:
        add("no-rows", "error", f"{path.name} has no result rows")

    # -- responses
    if p.response_field and f.response is None and n:
        add("missing-response-field", "error", f"response field {p.response_field!r} is not in the file")
    elif f.response is None and n:
        add("no-response-field", "warning",
            f"no response column found (looked for {', '.join(RESPONSE_FIELDS)}); pass response_field=")
    if f.null_response.n:
        add("null-response", "error",
            f"{f.null_response.n} of {n} rows ({_pct(f.null_response.n, n)}) have no {f.response!r} (null or missing)",
            f.null_response.n, ex(f.null_response))
    if f.empty_response.n:
        add("empty-response", "warning",
            f"{f.empty_response.n} of {n} rows ({_pct(f.empty_response.n, n)}) have an empty {f.response!r}",
            f.empty_response.n, ex(f.empty_response))

    # -- truncation
    if f.truncated.n:
        how = []
        if f.finish_length:
            how.append(f"{f.finish}={'/'.join(TRUNCATION_REASONS)}: {f.finish_length}")
        if f.tokens_at_max:
            how.append(f"{f.tokens} >= max_tokens={p.max_tokens}: {f.tokens_at_max}")
        share = f.truncated.n / n
        add("truncated", "error" if share >= 0.5 else "warning",
            f"{f.truncated.n} of {n} responses ({_pct(f.truncated.n, n)}) hit the token limit ({'; '.join(how)})",
            f.truncated.n, ex(f.truncated))
    if f.tokens_over.n:
        add("tokens-over-max", "warning",
            f"{f.tokens_over.n} rows have {f.tokens} > max_tokens={p.max_tokens}: is max_tokens right?",
            f.tokens_over.n, ex(f.tokens_over))
    if f.cut_checked and f.cut_eligible >= CUT_MIN_ROWS and f.cut.n >= CUT_SHARE * f.cut_eligible:
        add("cut-mid-sentence", "warning",
            f"{f.cut.n} of {f.cut_eligible} long responses ({_pct(f.cut.n, f.cut_eligible)}) end mid-sentence "
            f"(no finish_reason in the file): probably truncated, check max_tokens", f.cut.n, ex(f.cut))

    # -- missing / empty fields (response handled above)
    for col, c in f.empty.items():
        if not c.n or col == f.response:
            continue
        what = "all rows" if c.n == n else f"{c.n} of {n} rows ({_pct(c.n, n)})"
        add(f"empty-field:{col}", "warning", f"{col!r} is missing, null or empty in {what}", c.n, ex(c))

    # -- keys
    if f.key is None:
        if p.key != "id":
            add("missing-key-column", "error", f"key column {p.key!r} is not in the file")
        elif n:
            add("no-key-column", "warning",
                f"no id column (looked for {', '.join(KEY_FALLBACKS)}); duplicates not checked; pass key=")
    elif f.dup:
        add("duplicate-key", "error", f"{f.dup} rows repeat a {f.key!r} already seen", f.dup,
            tuple(f"{f.key}={v}" for v in f.dup_examples))

    # -- scores
    score_range = score_mean = None
    if p.score_field and f.score is None and n:
        add("missing-score-field", "error", f"score field {p.score_field!r} is not in the file")
    elif f.score is None and n:
        add("no-score-field", "warning",
            f"no score column found (looked for {', '.join(SCORE_FIELDS)}); pass score_field=")
    if f.score_non_numeric.n:
        add("non-numeric-score", "warning",
            f"{f.score_non_numeric.n} values of {f.score!r} are not numbers", f.score_non_numeric.n,
            ex(f.score_non_numeric))
    if f.score_n:
        score_range = (float(f.score_min), float(f.score_max))
        score_mean = f.score_sum / f.score_n
        if f.score_out.n:
            add("score-out-of-range", "error",
                f"{f.score_out.n} scores are outside {_num(p.score_range[0])}..{_num(p.score_range[1])} "
                f"(seen {_num(f.score_min)}..{_num(f.score_max)})", f.score_out.n, ex(f.score_out))
        if f.score_n >= 2 and f.score_min == f.score_max:
            if f.score_min == 0:
                add("all-zero-scores", "error",
                    f"every {f.score!r} is 0 ({f.score_n} rows): is the grader or answer extraction broken?",
                    f.score_n)
            else:
                add("constant-scores", "warning",
                    f"every {f.score!r} is {_num(f.score_min)} ({f.score_n} rows): is the grader broken?", f.score_n)

    token_range = None
    if f.token_min is not None:
        token_range = (int(f.token_min), int(f.token_max))
    order = {"error": 0, "warning": 1}
    probs.sort(key=lambda q: order[q.severity])  # stable: errors first, then the order above
    return ValidationReport(
        path=path, rows=n, problems=tuple(probs), columns=dict(f.columns), token_range=token_range,
        score_range=score_range, score_mean=score_mean, response_field=f.response, score_field=f.score,
        token_field=f.tokens, key=f.key, engine=engine,
    )


# ----------------------------------------------------------------------------------------------
# pyarrow engine


def _read_arrow(path: Path, *, required: bool):
    from runjob_core.errors import RunjobError

    try:
        import pyarrow as pa  # noqa: F401
    except ImportError:
        if required:
            raise RunjobError(f"reading {path.name} needs pyarrow: pip install pyarrow") from None
        return None
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path)
        except Exception as e:  # noqa: BLE001 - any arrow error means "not a readable parquet file"
            raise RunjobError(f"cannot read {path.name} as parquet: {e}") from None
    import pyarrow.json as paj

    try:
        return paj.read_json(path)
    except Exception as e:  # noqa: BLE001
        msg = str(e)
        if "straddl" in msg or "block" in msg.lower():  # a row larger than the 1 MiB default block
            try:
                return paj.read_json(path, read_options=paj.ReadOptions(block_size=64 << 20))
            except Exception:  # noqa: BLE001
                pass
        if required:
            raise RunjobError(f"pyarrow cannot read {path.name}: {msg.splitlines()[0]}") from None
        return None  # malformed line or a column that changes type: the python engine says where


def _arrow_type(t) -> str:
    import pyarrow.types as pt

    if pt.is_boolean(t):
        return "bool"
    if pt.is_integer(t):
        return "int"
    if pt.is_floating(t) or pt.is_decimal(t):
        return "float"
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_timestamp(t) or pt.is_date(t) or pt.is_time(t):
        return "string"  # the JSON reader turns ISO dates into timestamps; in the file they are strings
    if pt.is_struct(t) or pt.is_map(t):
        return "object"
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return "list"
    if pt.is_null(t):
        return "null"
    if pt.is_binary(t) or pt.is_large_binary(t):
        return "bytes"
    return str(t)


def _scan_arrow(table, p: _Params) -> _Facts:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    f = _Facts(rows=table.num_rows)
    n = table.num_rows
    f.columns = {fld.name: _arrow_type(fld.type) for fld in table.schema}

    def count(mask) -> _Count:
        """Rows where ``mask`` is true (nulls count as false) and the first few indices."""
        c = _Count()
        if mask is None:
            return c
        c.n = int(pc.sum(mask).as_py() or 0)
        if c.n:
            if isinstance(mask, pa.ChunkedArray):
                mask = mask.combine_chunks()
            idx = pc.indices_nonzero(pc.fill_null(mask, False))
            c.rows = [int(i) for i in idx[:N_EXAMPLES].to_pylist()]
            c.keys = [keycol[i].as_py() if keycol is not None else None for i in c.rows]
        return c

    def is_str(col) -> bool:
        return pt.is_string(col.type) or pt.is_large_string(col.type)

    def is_num(col) -> bool:
        return pt.is_integer(col.type) or pt.is_floating(col.type) or pt.is_boolean(col.type)

    # nested usage.completion_tokens etc. show up as "usage.completion_tokens" for detection
    names = dict(f.columns)
    for fld in table.schema:
        if pt.is_struct(fld.type):
            for sub in fld.type:
                names[f"{fld.name}.{sub.name}"] = _arrow_type(sub.type)

    def column(name: str):
        if name in f.columns:
            return table[name]
        top, sub = name.split(".", 1)
        return pc.struct_field(table[top], sub)

    f.key = _pick_key(f.columns, p.key)
    f.response = _pick(f.columns, p.response_field, RESPONSE_FIELDS)
    f.score = _pick(names, p.score_field, SCORE_FIELDS)
    f.tokens = next((c for c in TOKEN_FIELDS if c in names and names[c] in ("int", "float")), None)
    f.finish = next((c for c in FINISH_FIELDS if c in f.columns), None)

    keycol = table[f.key] if f.key is not None else None

    # generic: null/missing or "" per column
    for name in f.columns:
        col = table[name]
        if name == f.response:
            continue
        nulls = col.null_count
        if is_str(col):
            empties = int(pc.sum(pc.equal(col, "")).as_py() or 0)
            if nulls or empties:
                f.empty[name] = count(pc.or_kleene(pc.is_null(col), pc.equal(col, "")))
        elif nulls:
            f.empty[name] = count(pc.is_null(col))

    # responses
    if f.response is not None:
        col = table[f.response]
        if col.null_count:
            f.null_response = count(pc.is_null(col))
        if is_str(col):
            if n:
                f.empty_response = count(pc.or_(pc.equal(col, ""), pc.utf8_is_space(col)))
            if f.finish is None and n:
                f.cut_checked = True
                long = pc.greater_equal(pc.utf8_length(col), CUT_MIN_CHARS)
                f.cut_eligible = int(pc.sum(long).as_py() or 0)
                if f.cut_eligible:
                    tail = pc.utf8_rtrim_whitespace(pc.utf8_slice_codeunits(col, -8))
                    last = pc.utf8_slice_codeunits(tail, -1)
                    f.cut = count(pc.and_(long, pc.or_(pc.utf8_is_alpha(last), pc.equal(last, ","))))
        elif pt.is_list(col.type) or pt.is_large_list(col.type):
            f.empty_response = count(pc.equal(pc.list_value_length(col), 0))

    # truncation
    trunc = None
    if f.finish is not None and is_str(table[f.finish]):
        fin = pc.is_in(table[f.finish], value_set=pa.array(TRUNCATION_REASONS))
        f.finish_length = int(pc.sum(fin).as_py() or 0)
        trunc = fin
    if f.tokens is not None:
        tok = column(f.tokens)
        mm = pc.min_max(tok).as_py()
        if mm["min"] is not None:
            f.token_min, f.token_max = mm["min"], mm["max"]
        if p.max_tokens is not None:
            at = pc.fill_null(pc.greater_equal(tok, p.max_tokens), False)
            f.tokens_at_max = int(pc.sum(at).as_py() or 0)
            trunc = at if trunc is None else pc.or_(trunc, at)
            f.tokens_over = count(pc.greater(tok, p.max_tokens))
    if trunc is not None:
        f.truncated = count(trunc)

    # keys
    if f.key is not None:
        col = table[f.key]
        valid = n - col.null_count
        if pa.types.is_nested(col.type):
            # Arrow cannot hash struct or list keys: count them as the stdlib path does.
            _nested_key_dups(f, col.to_pylist())
        elif n > 1 and not col.null_count and pc.all(pc.greater(col.slice(1), col.slice(0, n - 1))).as_py():
            f.dup = 0  # strictly increasing (results in id order): no duplicates, no hashing
        else:
            f.dup = valid - (len(pc.unique(col)) - (1 if col.null_count else 0))
        if f.dup and not pa.types.is_nested(col.type):
            vc = pc.value_counts(col)
            vals, cnts = vc.field("values"), vc.field("counts")
            dups = pc.filter(vals, pc.and_(pc.greater(cnts, 1), pc.is_valid(vals)))
            f.dup_examples = [str(v) for v in dups[:N_EXAMPLES].to_pylist()]

    # scores
    if f.score is not None:
        col = column(f.score)
        if is_num(col):
            fl = pc.cast(col, pa.float64())
            f.score_n = len(fl) - fl.null_count
            if f.score_n:
                mm = pc.min_max(fl).as_py()
                f.score_min, f.score_max = mm["min"], mm["max"]
                f.score_sum = float(pc.sum(fl).as_py())
                if p.score_range is not None:
                    lo, hi = p.score_range
                    f.score_out = count(pc.or_(pc.less(fl, lo), pc.greater(fl, hi)))
        else:
            f.score_numeric = False
            f.score_non_numeric = count(pc.is_valid(col))
    return f


# ----------------------------------------------------------------------------------------------
# python engine (stdlib)

_TYPE_NAMES = {str: "string", int: "int", float: "float", bool: "bool", dict: "object", list: "list"}


def _nested_key_dups(f: _Facts, keys: list) -> None:
    """Duplicates among struct or list keys, compared by their canonical JSON."""
    seen: set[str] = set()
    for key in keys:
        if key is None:
            continue
        text = json.dumps(key, sort_keys=True, default=str)
        if text in seen:
            f.dup += 1
            if len(f.dup_examples) < N_EXAMPLES and text not in f.dup_examples:
                f.dup_examples.append(text)
        else:
            seen.add(text)


def _open_source(path: Path):
    """``(iterable, is_lines)``: the open text file (JSON Lines) or the list of a top-level JSON array."""
    from runjob_core.errors import RunjobError

    fh = open(path, encoding="utf-8", errors="replace", newline="\n")
    head = fh.read(4096).lstrip()
    fh.seek(0)
    if head.startswith("["):  # a JSON array of rows, or JSON Lines whose first row is an array
        try:
            data = json.load(fh)
        except ValueError:
            data = None
        if data is not None:
            fh.close()
            if not isinstance(data, list):
                raise RunjobError(f"{path.name} is JSON but not a list of rows")
            return data, False
        fh.seek(0)
    return fh, True


_SCANNER = json.scanner.make_scanner(json.JSONDecoder())  # the C scanner: no per-call encoding sniffing


def _parse_line(line: str, scan=_SCANNER) -> Any:
    """Parse one JSON Lines line; ``_BLANK`` for a blank line; raise ValueError if malformed."""
    try:
        obj, end = scan(line, 0)
    except StopIteration:
        stripped = line.strip()
        if not stripped:
            return _BLANK
        return json.loads(stripped)  # leading whitespace, or raises ValueError
    if end < len(line) - 1 and line[end:].strip():
        raise ValueError("extra data after the JSON value")
    return obj


_BLANK = object()
_BAD = object()


def _first_row(path: Path) -> dict | None:
    src, is_lines = _open_source(path)
    try:
        for item in src:
            if is_lines:
                try:
                    item = _parse_line(item)
                except ValueError:
                    continue
            if type(item) is dict:
                return item
        return None
    finally:
        if is_lines:
            src.close()


def _scan_python(path: Path, p: _Params) -> _Facts:
    f = _Facts()
    first = _first_row(path)  # detect the fields from the first row
    types: dict[str, set] = {}
    if first is not None:
        cols = {k: "" for k in first}
        names = dict(cols)
        for k, v in first.items():
            if type(v) is dict:
                for sub in v:
                    names[f"{k}.{sub}"] = ""
        f.key = _pick_key(cols, p.key)
        f.response = _pick(cols, p.response_field, RESPONSE_FIELDS)
        f.score = _pick(names, p.score_field, SCORE_FIELDS)
        f.tokens = next((c for c in TOKEN_FIELDS if c in names and type(_get(first, c)) in (int, float)), None)
        f.finish = next((c for c in FINISH_FIELDS if c in cols), None)

    kf, rf, sf, tf, ff = f.key, f.response, f.score, f.tokens, f.finish
    tf_top, tf_sub = (tf.split(".", 1) if tf and "." in tf else (tf, None))
    sf_top, sf_sub = (sf.split(".", 1) if sf and "." in sf else (sf, None))
    max_tokens = p.max_tokens
    lo, hi = p.score_range if p.score_range is not None else (-math.inf, math.inf)
    check_cut = ff is None
    f.cut_checked = check_cut and rf is not None

    empty: dict[str, _Count] = {}
    known_keys: dict[str, None] = {}  # insertion-ordered set of every column seen
    known_view = known_keys.keys()
    seen: set = set()
    dup_examples: list[str] = []
    null_resp, empty_resp, cut, trunc = f.null_response, f.empty_response, f.cut, f.truncated
    tokens_over, score_out, score_bad = f.tokens_over, f.score_out, f.score_non_numeric
    cut_eligible = finish_length = tokens_at_max = 0
    tmin = tmax = smin = smax = None
    ssum = 0.0
    sn = 0
    last_sig = None
    i = -1

    src, is_lines = _open_source(path)
    scan, blank, bad = _SCANNER, _BLANK, _BAD
    lineno = 0
    for line in src:
        lineno += 1
        if is_lines:
            try:  # inlined fast path of _parse_line
                row, end = scan(line, 0)
            except StopIteration:
                row = bad
            if row is bad or (end < len(line) - 1 and line[end:].strip()):
                try:
                    row = _parse_line(line)
                except ValueError:
                    row = None
                if row is blank:
                    continue
        else:
            row = line
        if type(row) is not dict:
            f.malformed.n += 1
            if len(f.malformed_lines) < N_EXAMPLES:
                f.malformed_lines.append(f"line {lineno}" if is_lines else f"item {lineno}")
            continue
        i += 1
        kv = row.get(kf) if kf is not None else None
        keys = row.keys()
        if keys != known_view:
            # a column appeared or is missing in this row
            for k in keys:
                if k not in known_keys:
                    known_keys[k] = None
                    if i:  # missing in every earlier row
                        c = empty.setdefault(k, _Count())
                        c.n += i
                        c.rows[:] = list(range(min(i, N_EXAMPLES)))
                        c.keys[:] = [None] * len(c.rows)
            if len(keys) != len(known_keys):
                for k in known_keys:
                    if k not in row:
                        empty.setdefault(k, _Count()).add(i, kv)
        vals = row.values()
        sig = tuple(map(type, vals))
        if sig != last_sig or keys != known_view:
            for k, v in row.items():
                t = types.get(k)
                if t is None:
                    types[k] = {type(v)}
                else:
                    t.add(type(v))
            last_sig = sig
        if None in vals or "" in vals:
            for k, v in row.items():
                if v is None or (v == "" and type(v) is str):
                    empty.setdefault(k, _Count()).add(i, kv)
        if kv is not None:
            try:
                if kv in seen:
                    f.dup += 1
                    if len(dup_examples) < N_EXAMPLES and str(kv) not in dup_examples:
                        dup_examples.append(str(kv))
                else:
                    seen.add(kv)
            except TypeError:  # unhashable (object or list) key
                kj = json.dumps(kv, sort_keys=True)
                if kj in seen:
                    f.dup += 1
                    if len(dup_examples) < N_EXAMPLES and kj not in dup_examples:
                        dup_examples.append(kj)
                else:
                    seen.add(kj)
        if rf is not None:
            r = row.get(rf)
            if r is None:
                null_resp.add(i, kv)
            elif type(r) is str:
                if not r or r.isspace():
                    empty_resp.add(i, kv)
                elif check_cut and len(r) >= CUT_MIN_CHARS:
                    cut_eligible += 1
                    c = r[-8:].rstrip()[-1:]
                    if c.isalpha() or c == ",":
                        cut.add(i, kv)
            elif type(r) is list and not r:
                empty_resp.add(i, kv)
        truncated = False
        if ff is not None and row.get(ff) in TRUNCATION_REASONS:
            finish_length += 1
            truncated = True
        if tf is not None:
            t = row.get(tf_top)
            if tf_sub is not None:
                t = t.get(tf_sub) if type(t) is dict else None
            if t is not None and type(t) in (int, float):
                if tmin is None:
                    tmin = tmax = t
                elif t < tmin:
                    tmin = t
                elif t > tmax:
                    tmax = t
                if max_tokens is not None and t >= max_tokens:
                    tokens_at_max += 1
                    truncated = True
                    if t > max_tokens:
                        tokens_over.add(i, kv)
        if truncated:
            trunc.add(i, kv)
        if sf is not None:
            s = row.get(sf_top)
            if sf_sub is not None:
                s = s.get(sf_sub) if type(s) is dict else None
            if s is not None:
                ts = type(s)
                if ts is float or ts is int or ts is bool:
                    if sn == 0:
                        smin = smax = s
                    elif s < smin:
                        smin = s
                    elif s > smax:
                        smax = s
                    sn += 1
                    ssum += s
                    if s < lo or s > hi:
                        score_out.add(i, kv)
                else:
                    score_bad.add(i, kv)

    if is_lines:
        src.close()
    f.rows = i + 1
    n = f.rows
    for k in known_keys:
        if k in empty:
            f.empty[k] = empty[k]
    f.columns = {k: _python_type(types.get(k, set())) for k in known_keys}
    f.cut_eligible = cut_eligible
    f.finish_length = finish_length
    f.tokens_at_max = tokens_at_max
    f.token_min, f.token_max = tmin, tmax
    if score_bad.n:
        f.score_numeric = False
    f.score_n, f.score_min, f.score_max, f.score_sum = sn, smin, smax, float(ssum)
    if f.score_n and smin is not None:
        f.score_min, f.score_max = float(smin), float(smax)
    f.dup_examples = dup_examples
    return f


def _get(row: dict, name: str) -> Any:
    if name in row:
        return row[name]
    if "." in name:
        top, sub = name.split(".", 1)
        v = row.get(top)
        return v.get(sub) if type(v) is dict else None
    return None


def _python_type(ts: set) -> str:
    names = {_TYPE_NAMES.get(t, t.__name__) for t in ts if t is not type(None)}
    if not names:
        return "null"
    if names == {"int", "float"}:
        return "float"
    if len(names) == 1:
        return names.pop()
    return "mixed(" + "|".join(sorted(names)) + ")"


def count_rows(path: Path) -> int:
    """Rows in a results file: non-blank lines of JSON Lines, rows of parquet or CSV (minus header)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    if suffix in (".csv", ".tsv"):
        import csv

        with open(path, newline="", encoding="utf-8") as fh:
            return max(0, sum(1 for _ in csv.reader(fh, delimiter="\t" if suffix == ".tsv" else ",")) - 1)
    if suffix == ".json":
        data = json_array(path)
        if data is not None:
            return len(data)
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def json_array(path: Path) -> list | None:
    """The rows of a .json file holding one JSON array, or None (then it is read as JSON Lines)."""
    with open(path, "rb") as fh:
        if not fh.read(4096).lstrip().startswith(b"["):
            return None
        fh.seek(0)
        try:
            data = json.load(fh)
        except ValueError:
            return None  # not one array after all: the caller reads it line by line
    return data if isinstance(data, list) else None

