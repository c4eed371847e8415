"""Many job specs' stored JSON and spec hashes at once: a sweep's elements.

``config.spec_json_and_hash`` unstructures a whole job and writes it twice (the store's
JSON, the hash's canonical JSON): ~45 us a job, 45 ms of a 1,000-element sweep's submit.
A sweep's elements hold the same object for every section no value of theirs changes (the
defaults, and the sections its loader shares: :mod:`runjob_core.sweep._load`), so each
section is unstructured and written once per distinct object, and each job's two texts are
put together from its sections' texts: a JSON object written with ``sort_keys`` is its
sorted keys and their values' texts joined with the separators, byte for byte what
``json.dumps`` writes for the whole (``tests/test_sweep_spec_texts.py`` holds them equal).
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Iterable
from typing import Any

import attrs

from runjob_core.config import plain_json
from runjob_core.models import JobSpec


def spec_texts(jobs: Iterable[JobSpec]) -> list[tuple[str, str]]:
    """``config.spec_json_and_hash(job)`` of each of *jobs*, in order."""
    from runjob_core.config import _ADDED_LATER, _NOT_HASHED

    fields = attrs.fields(JobSpec)
    names = sorted(f.name for f in fields)
    keys = {name: json.dumps(name) for name in names}
    later: dict[str, list[tuple[str, Any]]] = {}
    for section, key, default in _ADDED_LATER:
        later.setdefault(section, []).append((key, default))
    top = {id(f) for f in fields}
    # Made once here (json.dumps with options makes an encoder each call: half its time here).
    encoders = (json.JSONEncoder(sort_keys=True), json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str))
    # (field, id of its value) -> its "key: text" in the stored JSON and "key:text" in the hash's
    # (None: not hashed). The ids stay valid: every value is held by a job of *jobs* until the end.
    made: dict[tuple[str, Any], tuple[str, str | None]] = {}

    def pieces(job: JobSpec, name: str, value: Any) -> tuple[str, str | None]:
        key = (name, "{}") if type(value) is dict and not value else (name, id(value))  # env: {} made for each job
        found = made.get(key)
        if found is None:
            text, canonical = _section(job, name, value, top, later.get(name, ()), name in _NOT_HASHED, encoders)
            found = made[key] = (f"{keys[name]}: {text}", None if canonical is None else f"{keys[name]}:{canonical}")
        return found

    jobs = list(jobs)
    if not jobs:
        return []
    values_of = operator.attrgetter(*names)  # a tuple of every field's value (JobSpec has more than one)
    rows = [values_of(job) for job in jobs]
    # The fields whose value is one object in every job are written once, between the others.
    varying = [i for i in range(len(names)) if any(row[i] is not rows[0][i] for row in rows)]
    stored_parts: list = []
    hashed_parts: list = []
    for i, name in enumerate(names):
        if i in varying:
            stored_parts.append(i)
            hashed_parts.append(i)
            continue
        stored, hashed = pieces(jobs[0], name, rows[0][i])
        stored_parts.append(stored)
        if hashed is not None:
            hashed_parts.append(hashed)
    out = []
    for job, row in zip(jobs, rows):
        own = {i: pieces(job, names[i], row[i]) for i in varying}
        stored = ", ".join(own[p][0] if type(p) is int else p for p in stored_parts)
        canonical = ",".join([h for h in (own[p][1] if type(p) is int else p for p in hashed_parts) if h is not None])
        out.append((f"{{{stored}}}", hashlib.sha256(f"{{{canonical}}}".encode()).hexdigest()[:16]))
    return out


def _section(job: JobSpec, name: str, value: Any, top: set[int], later, not_hashed: bool,
             encoders: tuple[json.JSONEncoder, json.JSONEncoder]) -> tuple[str, str | None]:
    """Field *name* (its *value*) of *job*: its text in the stored JSON, and in the hash's
    (None: not hashed)."""
    if attrs.has(type(value)):
        plain = attrs.asdict(value, recurse=True)  # what attrs.asdict(job) holds for it
    elif plain_json(value):
        plain = value  # written as attrs.asdict's copy of it would be (a tuple as a list)
    else:  # a set, a record in a dict, a key that is not a string: attrs.asdict(job)'s own
        # (the filter keeps this one field at the top and every field below it)
        plain = attrs.asdict(job, recurse=True, filter=lambda a, _v: id(a) not in top or a.name == name)[name]
    stored = encoders[0].encode(plain)  # json.dumps(plain, sort_keys=True)
    if not_hashed:
        return stored, None
    if later:  # config._hash_of: keys added after 0.1 left out while they hold their default
        plain = dict(plain)
        for key, default in later:
            if plain.get(key, default) == default:
                plain.pop(key, None)
    return stored, encoders[1].encode(plain)  # json.dumps(.., sort_keys=True, separators=(",", ":"), default=str)

