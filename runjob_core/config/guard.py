"""Limits on what a job or cluster file may hold, checked before anything is built from it.

* Size: a job file is a few kilobytes; one over :data:`MAX_FILE_BYTES` is data in the wrong
  place (and a 50 MB file took minutes to parse).
* YAML aliases: ``&a``/``*a`` share one object in what PyYAML returns, but everything
  after it (the spec hash, params.json, the store) writes each use out in full, so nine
  levels of nine aliases become 387 million values. The expanded size is counted on the
  shared objects (each once) and refused past :data:`MAX_EXPANDED_VALUES`.
* Tokens: a token written literally in a spec would be stored in state.db and shipped in
  the job script and params.json. Every string of the spec is checked for token-shaped
  values; the refusal names the key path and the right way to pass credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Job and cluster files larger than this are refused.
MAX_FILE_BYTES = 1 << 20
#: A spec whose values, written out with every alias expanded, outnumber this is refused.
MAX_EXPANDED_VALUES = 100_000
#: Mappings and lists nested deeper than this are refused: no job spec needs it, and what
#: is built from a spec (the spec cache's pickle, cattrs, JSON) recurses once per level.
MAX_DEPTH = 100

HOW_TO_PASS_SECRETS = (
    "runjob never writes tokens into a job: log in on the machine that runs it (`huggingface-cli login` "
    "there, or HF_TOKEN in that machine's own environment), use the Hub's saved token for uploads, "
    "or RunPod secrets for pods"
)


def check_size(data: bytes, label: str) -> str | None:
    if len(data) <= MAX_FILE_BYTES:
        return None
    return (f"{label} is {len(data) / (1 << 20):.1f} MiB; job and cluster files are read up to "
            f"{MAX_FILE_BYTES >> 20} MiB: keep data out of them (point data.input at a file)")


def check_expansion(raw: Any, label: str) -> str | None:
    """The one-line refusal when *raw* expands past the budget, else None."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    path: list[str] = []

    def size(value: Any) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in in_progress:
            raise _Recursive
        if len(path) >= MAX_DEPTH:
            raise _TooDeep("$" + "".join(path[:4]) + " ... " + "".join(path[-2:]))
        in_progress.add(key)
        children = value.items() if isinstance(value, dict) else enumerate(value)
        total = 1
        for k, child in children:
            path.append(f".{k}" if isinstance(value, dict) else f"[{k}]")
            total += size(child)
            path.pop()
            if total > MAX_EXPANDED_VALUES:
                break  # no need to count further (and never exponential: each object once)
        in_progress.discard(key)
        sizes[key] = total
        return total

    try:
        total = size(raw)
    except _Recursive:
        return f"{label} has a YAML alias that contains itself: write the values out instead of using the alias"
    except _TooDeep as exc:
        return (f"{label} nests mappings or lists more than {MAX_DEPTH} levels deep at {exc}: flatten it "
                "(deep data belongs in a file the job reads, e.g. data.input)")
    except RecursionError:
        return f"{label} nests too deeply: flatten it"
    if total > MAX_EXPANDED_VALUES:
        return (f"{label}: its YAML aliases (*name) expand to more than {MAX_EXPANDED_VALUES:,} values; "
                "write the values out, or use fewer and smaller aliases")
    return None


class _Recursive(Exception):
    pass


class _TooDeep(Exception):
    """Raised with the key path where the nesting passed :data:`MAX_DEPTH`."""


def token_problems(raw: Any, label: str, path: str = "$") -> list[str]:
    """One line per string of *raw* that holds a token-shaped value, naming its key path."""
    from runjob_core.redact import find_token

    problems: list[str] = []
    seen: set[int] = set()

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            if find_token(value):
                problems.append(f"a token-shaped value at {where} in {label}: remove it; {HOW_TO_PASS_SECRETS}")
            return
        if isinstance(value, (dict, list)):
            if id(value) in seen:
                return
            seen.add(id(value))
        if isinstance(value, Mapping):
            for key, child in value.items():
                walk(child, f"{where}.{key}")
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, f"{where}[{index}]")

    walk(raw, path)
    return problems
