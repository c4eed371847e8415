"""Benchmark references: how to evaluate a benchmark right, and what to check in a job spec.

A reference is a Markdown file with YAML front matter. The front matter names the
benchmark and holds the machine-checkable rules; the body is for people (and agents):
evaluation method, pitfalls, prompt format, setup checklist. ``runjob`` finds references
in three places, and the first one that knows a name wins:

1. the project: ``.runjob/references/*.md``, then the seed layout
   ``.claude/references/datasets_and_tasks/`` with its ``datasets_and_tasks_map.md`` index
   (source ``"project"``);
2. plugins, through the ``runjob_references`` hook (source: the plugin's name);
3. the pack shipped in ``runjob_core/data/references/`` (source ``"runjob-core"``).

File format
===========

.. code-block:: markdown

    ---
    name: GSM8K                          # required; what `benchmark:` in job.yaml names
    aliases: [gsm8k, openai/gsm8k]       # other names, HF dataset ids, harness task names
    description: one line                # optional
    tags: [math, reasoning]              # optional
    dataset: openai/gsm8k (main, test)   # optional, free text
    sources: [https://arxiv.org/abs/...] # where every claim below comes from
    scoring: exact match after extracting the number after '####'
    prompt_format: "Q: ... A:" with 8 CoT exemplars
    num_fewshot: 8                       # an integer, a list of accepted counts, or null
    expected_max_tokens: {non_reasoning: 512, reasoning: 8192}   # or one integer
    expected_score: {min: 0, max: 1}     # a row's score range; chance: what guessing scores (multiple choice)
    rules: [...]                         # see below
    ---
    # GSM8K
    ## Evaluation method
    ## Pitfalls
    ## Setup checklist

Unknown front-matter keys are errors (with a "did you mean"), except keys starting with
``x-`` or ``x_``, which are kept for extensions. Names are matched case-insensitively,
ignoring ``-``, ``_`` and spaces (``GSM-8K`` finds ``gsm8k``); a Hub id such as
``someone/gsm8k`` also finds a reference by its last part when nothing matches in full.

Rule schema
===========

Each entry of ``rules:`` is a mapping:

``path`` (required)
    Where to look in the job spec, dotted: ``model.max_tokens``, ``data.input``,
    ``params.num_fewshot``, ``benchmark``, ``template``, ``env.HF_TOKEN`` ... The first part
    must be a field of :class:`~runjob_core.models.JobSpec`; the second part of ``model``,
    ``resources``, ``data``, ``checkpoint``, ``upload``, ``canary``, ``resume`` and
    ``health`` must be a field of that record; ``params``, ``env`` and ``columns`` take
    any key (and nested keys inside ``params``). A list of paths means "the first one
    that is set" (``[model.path, model.name]``).
Checks (at least one; all given must hold)
    ``equals: VALUE`` · ``one_of: [V1, V2, ...]`` · ``min: NUMBER`` · ``max: NUMBER``
    (``min`` and ``max`` together make a range) · ``matches: REGEX`` (``re.search`` on the
    value as text, so anchor with ``^...$`` for a full match) · ``required: true``.
    Numbers compare by value (``8`` equals ``8.0``); everything else compares exactly.
``severity``
    ``error`` (the default: the spec is definitely wrong, pre-flight refuses it) or
    ``warning`` (probably wrong, or not comparable with published numbers).
``why`` (required)
    One line naming the pitfall, so the finding explains itself.
``fix`` (optional)
    What to do, when the default ("raise model.max_tokens to at least 2048") is not enough.
``when`` (optional)
    A condition, or a list of conditions of which any one is enough, for the rule to
    apply. A condition is a mapping with a ``path`` and the same checks as a rule (no
    severity, why, fix or when); it holds when the value is set and passes every check,
    so ``{path: params.data_source, required: true}`` means "only when data_source is set".

A value that is not set (absent, null or an empty string) fails a ``required`` rule with
the rule's severity; for any other rule it is a *warning*, "not set; the reference
expects ...", because the job may pass the setting another way (on its command line). A
malformed reference raises :class:`~runjob_core.errors.ConfigError` naming the file and
the key path (``min must be a number at $.rules[1].min in gsm8k.md``).

Conventional ``params`` keys the shipped rules read: ``num_fewshot``, ``n_samples``
(samples per problem), ``temperature``, ``data_source`` (the verl reward router's
name), ``reasoning`` (``true`` for a long-chain-of-thought model), ``start_date`` and
``release_version`` (LiveCodeBench), ``shuffle_choices`` (GPQA).

Seed layout
===========

``.claude/references/datasets_and_tasks/datasets_and_tasks_map.md`` is an index. It may
be a Markdown table whose header has a name column (``Benchmark``, ``Name``, ``Dataset``
or ``Task``), optionally a file column (``File``, ``Reference``, ``Path``, ``Link``) and
an ``Aliases`` column; the file is a link (``[gsm8k.md](gsm8k.md)``) or a plain file name.
It may also be a list: ``- [GSM8K](gsm8k.md) (aliases: gsm-8k)``, ``- GSM8K: gsm8k.md``
or ``- GSM8K | gsm-8k, openai/gsm8k | gsm8k.md``. A listed file without front matter still
loads, named by the index, with no rules (its body is the whole file). Markdown files in
the folder that the index does not list load too, named by their front matter, else
their first ``#`` heading, else their file name. Index rows whose file does not exist are
skipped.

Triviality
==========

A job is *non-trivial* — it gets the "no reference for this benchmark" warning — when it
names a ``benchmark:`` and is not a canary run: its score will be read as a number on
that benchmark. Jobs without ``benchmark:`` (smoke tests, data processing) and canaries
(a pipeline check on a few rows) are trivial. Rules are checked whenever a reference is
found, trivial or not.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from attrs import frozen

# The rules (validation, checking) live in their own module; these names stay part of this one's.
from runjob_core.references.rules import (  # noqa: F401  (describe_rule, validate_rules: re-exported)
    RuleResult, check_rules, describe_rule, validate_front_matter, validate_rules,
)
from runjob_core.config import describe_value, load_yaml
from runjob_core.errors import ConfigError, RunjobError
from runjob_core.models import JobSpec, Reference

CORE_SOURCE = "runjob-core"
PROJECT_SOURCE = "project"
#: Folder of the user's own references, relative to the project root.
PROJECT_DIR = Path(".runjob") / "references"
#: The seed skill's layout: a folder of Markdown files and an index.
SEED_DIR = Path(".claude") / "references" / "datasets_and_tasks"
SEED_INDEX = "datasets_and_tasks_map.md"
#: Body sections every shipped reference has (and ``scaffold`` writes).
SECTIONS = ("Evaluation method", "Pitfalls", "Prompt format", "Setup checklist")

@frozen
class IndexEntry:
    """One row of a seed-layout index: a benchmark name, its aliases and its file."""

    name: str
    file: str
    aliases: tuple[str, ...] = ()


# --------------------------------------------------------------------------- names


def normalize(name: str) -> str:
    """The form names are compared in: lower case, without ``-``, ``_`` and whitespace."""
    return re.sub(r"[\s_\-]+", "", str(name).strip().lower())


def slugify(name: str) -> str:
    """A file name for *name*: ``SWE-bench Verified`` -> ``swe-bench-verified``."""
    return re.sub(r"[^a-z0-9.]+", "-", name.strip().lower()).strip("-.")


def precedence(reference: Reference) -> int:
    """0 for the project's references, 1 for plugins', 2 for the shipped pack's."""
    if reference.source == PROJECT_SOURCE:
        return 0
    if reference.source == CORE_SOURCE:
        return 2
    return 1


def find_reference(name: str, references: Iterable[Reference]) -> Reference | None:
    """The reference called *name* (or with *name* among its aliases), or ``None``.

    Case-insensitive, ignoring ``-``, ``_`` and spaces. Of several references with the same
    name only the winner counts (the project's over a plugin's, a plugin's over the shipped
    pack's, see :func:`merge_references`), and it answers to the aliases of the ones it
    hides too: a project ``GSM8K`` is found as ``openai/gsm8k``. When different references
    match, the same precedence decides, then the order given. A Hub id (``org/name``) that
    matches nothing in full is tried by its last part.
    """
    if not name or not str(name).strip():
        return None
    table = _lookup_table(references)
    wanted = normalize(name)
    for reference, names in table:
        if wanted in names:
            return reference
    if "/" in str(name):
        tail = normalize(str(name).rstrip("/").rsplit("/", 1)[-1])
        for reference, names in table:
            if tail in names:
                return reference
    return None


def _lookup_table(references: Iterable[Reference]) -> list[tuple[Reference, set[str]]]:
    """``(winner, every normalised name and alias of its group)`` in precedence order."""
    groups: dict[str, list[Reference]] = {}
    for reference in sorted(references, key=precedence):  # stable within a layer
        groups.setdefault(normalize(reference.name), []).append(reference)
    return [(group[0], {normalize(n) for r in group for n in (r.name, *r.aliases)}) for group in groups.values()]


def merge_references(references: Iterable[Reference]) -> list[Reference]:
    """One reference per name, the winner by precedence (project > plugin > pack), in
    precedence order (stable: the given order within one layer)."""
    seen: set[str] = set()
    merged = []
    for reference in sorted(references, key=precedence):
        key = normalize(reference.name)
        if key in seen:
            continue
        seen.add(key)
        merged.append(reference)
    return merged


def shadowing(references: Iterable[Reference]) -> dict[int, Reference]:
    """For each reference hidden by another of the same name: ``id(hidden) -> winner``."""
    winners: dict[str, Reference] = {}
    hidden: dict[int, Reference] = {}
    for reference in sorted(references, key=precedence):
        key = normalize(reference.name)
        if key in winners:
            if not (winners[key].source == reference.source and winners[key].path == reference.path):
                hidden[id(reference)] = winners[key]
        else:
            winners[key] = reference
    return hidden


def _dedupe(references: Iterable[Reference]) -> list[Reference]:
    """Drop exact repeats (same source, path and name), e.g. a plugin re-exporting the pack."""
    seen: set[tuple[str, str | None, str]] = set()
    out = []
    for reference in references:
        key = (reference.source, reference.path, normalize(reference.name))
        if key not in seen:
            seen.add(key)
            out.append(reference)
    return out


# --------------------------------------------------------------------------- loading


_FRONT_RE = re.compile(r"\A\ufeff?---[ \t]*\r?\n")
_FRONT_END_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)


def split_front_matter(text: str, label: str) -> tuple[dict[str, Any] | None, str]:
    """``(front matter, body)``; ``None`` when the file has no front matter."""
    start = _FRONT_RE.match(text)
    if not start:
        return None, text
    end = _FRONT_END_RE.search(text, start.end())
    if not end:
        raise ConfigError(label, [f"front matter of {label} is not closed: end it with a line '---'"])
    raw_text = text[start.end():end.start()]
    try:
        raw = load_yaml(raw_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 2}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(label, [f"YAML syntax error in the front matter of {label}{where}: {problem}"]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(label, [f"expected a mapping at $ in the front matter of {label}, got {describe_value(raw)}"])
    body = text[end.end():].lstrip("\r\n")
    return dict(raw), body


def load_reference_file(
    path: str | Path, *, source: str = PROJECT_SOURCE, default_name: str | None = None,
    default_aliases: Sequence[str] = (),
) -> Reference:
    """Read one reference file; its rules are validated.

    :param source: ``"project"`` for the user's files, ``"runjob-core"`` for the pack, or
        the plugin's name.
    :param default_name: the name to use when the file has no front matter (the seed
        index's name); otherwise its first ``#`` heading, else the file name.
    :param default_aliases: extra aliases (the seed index's), merged with the file's.
    :raises ConfigError: the file cannot be read or its front matter is malformed; every
        problem names the file and the key path.
    """
    path = Path(path)
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(label, [f"{label}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(label, [f"{label}: cannot read ({getattr(exc, 'strerror', None) or exc})"]) from None
    return parse_reference(text, label=label, source=source, path=str(path), default_name=default_name,
                           default_aliases=default_aliases, stem=path.stem)


def parse_reference(
    text: str, *, label: str = "<reference>", source: str = PROJECT_SOURCE, path: str | None = None,
    default_name: str | None = None, default_aliases: Sequence[str] = (), stem: str | None = None,
) -> Reference:
    """A :class:`Reference` from the text of a reference file (see :func:`load_reference_file`)."""
    front, body = split_front_matter(text, label)
    if front is None:
        name = default_name or _first_heading(text) or stem
        if not name:
            raise ConfigError(label, [f"{label} has no front matter and no '# ' heading to name it: add 'name:' front matter"])
        aliases = _unique(a for a in (*default_aliases, *([stem] if stem and normalize(stem) != normalize(name) else []))
                          if normalize(a) != normalize(name))
        return Reference(name=name, source=source, aliases=aliases, path=path, rules=(), body=text)
    meta = validate_front_matter(front, label)
    extra = [default_name] if default_name and normalize(default_name) != normalize(meta["name"]) else []
    aliases = _unique(a for a in (*meta.get("aliases", ()), *extra, *default_aliases) if normalize(a) != normalize(meta["name"]))
    return Reference(name=meta["name"], source=source, aliases=aliases, path=path, rules=tuple(meta.get("rules", ())),
                     body=body)


def _first_heading(text: str) -> str | None:
    match = re.search(r"^#[ \t]+(.+?)[ \t#]*$", text, re.MULTILINE)
    return _strip_markup(match.group(1)) if match else None


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    out = []
    for name in names:
        key = normalize(name)
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return tuple(out)


def reference_metadata(reference: Reference) -> dict[str, Any]:
    """The validated front matter of *reference*'s file (``{}`` when it has none or no file)."""
    if not reference.path:
        return {}
    path = Path(reference.path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    front, _body = split_front_matter(text, str(path))
    return validate_front_matter(front, str(path)) if front is not None else {}


def load_reference_folder(folder: str | Path, *, source: str) -> list[Reference]:
    """Every ``*.md`` reference in *folder* (not README.md or ``_*``), sorted by file name.

    For plugins: ``return load_reference_folder(Path(__file__).parent / "references", source="myplugin")``.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return [load_reference_file(p, source=source) for p in sorted(folder.glob("*.md")) if _is_reference_file(p)]


def _is_reference_file(path: Path) -> bool:
    return path.is_file() and not path.name.startswith(("_", ".")) and path.name.lower() != "readme.md"


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[Reference, ...]:
    from importlib.resources import files

    folder = files("runjob_core") / "data" / "references"
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".md") and not entry.name.startswith(("_", ".")) and entry.name.lower() != "readme.md":
            label = f"runjob_core/data/references/{entry.name}"
            found.append(parse_reference(entry.read_text(encoding="utf-8"), label=label, source=CORE_SOURCE,
                                         path=str(entry), stem=entry.name[:-3]))
    return tuple(found)


def builtin_references() -> list[Reference]:
    """The pack shipped with runjob (``runjob_core/data/references/*.md``)."""
    return list(_builtin())


def project_references(cwd: str | Path | None = None) -> list[Reference]:
    """The project's own references: ``.runjob/references/*.md``, then the seed layout.

    When both define a name, the ``.runjob/`` one wins (both are kept; lookups take the first).
    """
    root = Path(cwd) if cwd is not None else Path.cwd()
    found = load_reference_folder(root / PROJECT_DIR, source=PROJECT_SOURCE)
    found += seed_references(root / SEED_DIR)
    return found


def seed_references(folder: str | Path) -> list[Reference]:
    """The references of a seed-layout folder, indexed by ``datasets_and_tasks_map.md``."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    index = folder / SEED_INDEX
    entries = parse_index(index.read_text(encoding="utf-8")) if index.is_file() else []
    found: list[Reference] = []
    listed: set[Path] = set()
    by_file: dict[Path, list[IndexEntry]] = {}
    for entry in entries:
        target = (folder / entry.file).resolve()
        by_file.setdefault(target, []).append(entry)
    for target, group in by_file.items():
        if not target.is_file():
            continue
        listed.add(target)
        first = group[0]
        aliases = _unique(a for e in group for a in (*([e.name] if e is not first else []), *e.aliases))
        found.append(load_reference_file(target, source=PROJECT_SOURCE, default_name=first.name, default_aliases=aliases))
    for path in sorted(folder.glob("*.md")):
        if path.name == SEED_INDEX or not _is_reference_file(path) or path.resolve() in listed:
            continue
        found.append(load_reference_file(path, source=PROJECT_SOURCE))
    return found


# --------------------------------------------------------------------------- index


_LINK_RE = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _strip_markup(text: str) -> str:
    text = _LINK_RE.sub(lambda m: m.group(1), text)
    return re.sub(r"(\*\*|__|\*|`)(.+?)\1", r"\2", text).strip().strip("*`").strip()


def _file_of(cell: str, *, allow_bare: bool = False) -> str | None:
    """The Markdown file a cell points to: a link target or a file name (``gsm8k.md``).

    With *allow_bare*, a plain name without extension (``gsm8k``) means ``gsm8k.md``.
    """
    link = _LINK_RE.search(cell)
    target = link.group(2) if link else cell.strip().strip("`").strip()
    target = target.split("#", 1)[0].strip()
    if not target or re.match(r"^[a-z][a-z0-9+.-]*://", target, re.IGNORECASE):
        return None
    if target.lower().endswith((".md", ".markdown")):
        return target
    if allow_bare and not link and re.fullmatch(r"[\w][\w./-]*", target) and "." not in Path(target).name:
        return f"{target}.md"
    return None


def _aliases_of(text: str) -> tuple[str, ...]:
    parts = re.split(r"[,;]", _strip_markup(text))
    return tuple(p.strip().strip("`").strip() for p in parts if p.strip() and p.strip() not in ("-", "—", "n/a", "none"))


def _cells(line: str) -> list[str]:
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", inner)]


def parse_index(text: str) -> list[IndexEntry]:
    """The entries of a seed-layout index (a Markdown table or list; see the module doc)."""
    entries: list[IndexEntry] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\s*\|?[\s:|-]*-[\s:|-]*\|?\s*", lines[i + 1]):
            header = [_strip_markup(c).lower() for c in _cells(line)]
            i += 2
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            entries += _table_entries(header, rows)
            continue
        item = re.match(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)\s*$", line)
        if item:
            entry = _list_entry(item.group(1))
            if entry is not None:
                entries.append(entry)
        i += 1
    return entries


def _column(header: list[str], *words: str) -> int | None:
    for word in words:
        for index, title in enumerate(header):
            if word in title:
                return index
    return None


def _table_entries(header: list[str], rows: list[list[str]]) -> list[IndexEntry]:
    name_col = _column(header, "benchmark", "name", "dataset", "task")
    file_col = _column(header, "file", "reference", "path", "link")
    alias_col = _column(header, "alias")
    if name_col is None:
        name_col = 0
    entries = []
    for cells in rows:
        def cell(index: int | None) -> str:
            return cells[index] if index is not None and index < len(cells) else ""

        file = _file_of(cell(file_col), allow_bare=True) if file_col is not None else None
        if file is None:
            file = next((f for f in (_file_of(c) for c in cells if _LINK_RE.search(c)) if f), None)
        name = _strip_markup(cell(name_col))
        if not name or file is None:
            continue
        entries.append(IndexEntry(name=name, file=file, aliases=_aliases_of(cell(alias_col)) if alias_col is not None else ()))
    return entries


def _list_entry(item: str) -> IndexEntry | None:
    if "|" in item:
        parts = [p.strip() for p in item.split("|")]
        file = _file_of(parts[-1], allow_bare=True)
        if file and len(parts) >= 2:
            aliases = _aliases_of(parts[1]) if len(parts) >= 3 else ()
            return IndexEntry(name=_strip_markup(parts[0]), file=file, aliases=aliases)
        return None
    aliases: tuple[str, ...] = ()
    alias_match = re.search(r"\(?\baliases?\s*:\s*([^)]*)\)?", item, re.IGNORECASE)
    if alias_match:
        aliases = _aliases_of(alias_match.group(1))
        item = (item[:alias_match.start()] + item[alias_match.end():]).strip()
    link = _LINK_RE.search(item)
    if link:
        file = _file_of(link.group(0))
        if file is None:
            return None
        text = link.group(1).strip()
        if not text or _file_of(text):  # the link shows the file name: the name is beside it
            before = re.sub(r"\s*(?::|—|–|->|=>|-)\s*$", "", item[:link.start()]).strip()
            after = re.sub(r"^\s*(?::|—|–|->|=>|-)\s*", "", item[link.end():]).strip()
            text = before or after
        name = _strip_markup(text)
        return IndexEntry(name=name, file=file, aliases=aliases) if name else None
    plain = re.match(r"^(?P<name>.+?)\s*(?::|—|–|->|=>|\s-)\s*`?(?P<file>[^\s`]+\.(?:md|markdown))`?", item)
    if plain:
        return IndexEntry(name=_strip_markup(plain.group("name")), file=plain.group("file"), aliases=aliases)
    return None


def is_trivial(job: JobSpec, *, canary: bool = False) -> bool:
    """Whether a missing reference is fine for *job*: no ``benchmark:``, or a canary run."""
    return canary or not (job.benchmark and job.benchmark.strip())


def reference_for_job(job: JobSpec, references: Iterable[Reference]) -> Reference | None:
    """The reference of ``job.benchmark``; without one, of ``data.input`` when it is a known
    dataset id (``openai/gsm8k``) — never a guess from a file name."""
    references = list(references)
    if job.benchmark and job.benchmark.strip():
        return find_reference(job.benchmark, references)
    if job.data.input:
        wanted = normalize(job.data.input)
        for candidate in sorted(references, key=precedence):
            if any("/" in a and normalize(a) == wanted for a in candidate.aliases):
                return candidate
    return None


@frozen
class Review:
    """What the references say about one job: for pre-flight."""

    reference: Reference | None
    results: tuple[RuleResult, ...]
    #: Error-level failures: pre-flight should refuse.
    problems: tuple[str, ...]
    warnings: tuple[str, ...]


def review_job(job: JobSpec, references: Iterable[Reference], *, canary: bool = False) -> Review:
    """Find *job*'s reference and check its rules; one line per problem and warning.

    A non-trivial job (see :func:`is_trivial`) on a benchmark without a reference gets a
    warning that says so and how to add one.
    """
    reference = reference_for_job(job, references)
    if reference is None:
        warnings = () if is_trivial(job, canary=canary) else (
            f"no benchmark reference for {job.benchmark!r}: its evaluation pitfalls cannot be checked; "
            f"write one with: runjob reference new {job.benchmark}",
        )
        return Review(None, (), (), warnings)
    results = tuple(check_rules(reference, job))
    where = f"{reference.name} reference ({reference.source})"
    problems = tuple(f"{where}: {r.message} (why: {r.why})" for r in results if not r.ok and r.severity == "error")
    warnings = tuple(f"{where}: {r.message} (why: {r.why})" for r in results if not r.ok and r.severity != "error")
    return Review(reference, results, problems, warnings)


def plugin_references(context: Any) -> list[Reference]:
    """The references plugins return from ``runjob_references`` (for pre-flight)."""
    from runjob_core import _plugin_errors, plugins

    def failed(name: str, exc: BaseException) -> None:
        _plugin_errors.record(context, None, "runjob_references", name, exc)

    found = plugins.flatten(plugins.call_each(context.pm.hook.runjob_references, {"context": context}, on_error=failed))
    bad = [r for r in found if not isinstance(r, Reference)]
    if bad:
        raise RunjobError(f"a plugin returned {type(bad[0]).__name__} from runjob_references; expected Reference records")
    return found


def all_references(cwd: str | Path | None = None, plugin_refs: Iterable[Reference] = ()) -> list[Reference]:
    """Every reference found: the project's, then plugins', then the pack's (exact repeats dropped).

    Pass the list to :func:`find_reference` (which applies precedence) or
    :func:`merge_references` (one per name).
    """
    return _dedupe([*project_references(cwd), *plugin_refs, *builtin_references()])


# --------------------------------------------------------------------------- scaffold


SCAFFOLD = """\
---
# A benchmark reference for runjob. The front matter is checked when runjob loads it;
# the body is for the people (and agents) who set up the evaluation.
name: {name}
# Other names the benchmark goes by: Hub dataset ids, harness task names, spellings.
aliases: []
description: ""              # one line: what the benchmark measures, how many problems
tags: []                     # e.g. [math, reasoning], [code], [knowledge, multiple-choice]
dataset: ""                  # e.g. org/dataset (config, split)
# Where the facts below come from: the paper, the dataset card, the official repository,
# the harness task config. Every claim in this file should trace back to one of them.
sources: []
scoring: ""                  # e.g. exact match after extracting the final answer; pass@1
prompt_format: ""            # e.g. zero-shot, "Please reason step by step ..."
num_fewshot: null            # a count, a list of accepted counts, or null
expected_max_tokens: null    # e.g. {{non_reasoning: 2048, reasoning: 32768}}
expected_score: null         # e.g. {{min: 0, max: 1, chance: 0.25}}: the report flags scores outside it or below chance
# Machine-checkable rules, applied to every job with `benchmark: {title}`.
# Each rule: path (into job.yaml), one or more checks (equals, one_of, min, max,
# matches, required: true), severity (error | warning; default error), why (one line),
# optionally fix (what to do) and when (a condition: {{path: ..., <check>}}).
# Use `error` only for what is definitely wrong.
rules: []
#  - path: params.num_fewshot
#    one_of: [0, 5]
#    severity: warning
#    why: published numbers use 5-shot; other counts are not comparable
#  - path: model.max_tokens
#    min: 2048
#    severity: warning
#    why: truncated answers have no final answer and score 0
---
# {title}

One paragraph: what the benchmark measures, who introduced it, how many problems, which split.

## Evaluation method

How an answer is scored, exactly: answer extraction, normalisation, equivalence checking,
the metric (accuracy, pass@k with the unbiased estimator, ...) and how it is aggregated.

## Pitfalls

- The mistakes that silently change the number (wrong split, truncation, answer extraction).

## Prompt format

The canonical prompt, quoted, and the few-shot count.

## Setup checklist

- [ ] Dataset, config and split:
- [ ] Prompt and few-shot count:
- [ ] max_tokens (reasoning models need far more):
- [ ] Scoring code and a hand-checked sample of extracted answers:
- [ ] Number of samples per problem and seeds:
"""


def scaffold(name: str, folder: str | Path | None = None) -> Path:
    """Write ``.runjob/references/<slug>.md`` under the project *folder* and return its path.

    :raises RunjobError: the name gives an empty file name, or the file exists (never overwritten).
    """
    name = " ".join(str(name).split())
    slug = slugify(name)
    if not slug:
        raise RunjobError(f"cannot make a file name from {name!r}: use letters or digits")
    target = (Path(folder) if folder is not None else Path.cwd()) / PROJECT_DIR / f"{slug}.md"
    if target.exists():
        raise RunjobError(f"{target} already exists; edit it, or remove it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    quoted = name if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 ._/+()-]*", name) else json.dumps(name)
    text = SCAFFOLD.format(name=quoted, title=name)
    with open(target, "x", encoding="utf-8") as handle:
        handle.write(text)
    return target
