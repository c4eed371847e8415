"""A sweep spec read from its file: the sweep's own keys checked, every element validated as
the ordinary job it becomes. Errors name the file, the key path and, for an element, which."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import attrs

from runjob_core import config
from runjob_core.errors import ConfigError
from runjob_core.models import JobSpec
from runjob_core.sweep._jobs import element_specs
from runjob_core.sweep._spec import SweepElement, expand_sweep

#: Element problems shown before "... and N more".
_SHOWN = 12


@attrs.frozen
class Sweep:
    """A validated sweep spec: *jobs* are its elements' job specs, in element order."""

    name: str
    source: str
    base_dir: str
    spec: dict[str, Any]
    elements: tuple[SweepElement, ...]
    jobs: tuple[JobSpec, ...]
    #: ``sweep.max_parallel``; None leaves it to the backend (local: its GPU count, or 1).
    max_parallel: int | None
    #: The keys whose values differ between elements, in the order the spec gives them.
    varying: tuple[str, ...]

    #: Each element's (spec JSON as stored, spec hash), from one unstructure of its job, worked
    #: out once (a 1,000-element submit asked for each hash several times: the sweep's hash,
    #: its record, each element's submit; and made each JSON again when recording it).
    _stored: tuple[tuple[str, str], ...] = attrs.field(init=False, eq=False, repr=False)
    #: Each element's job spec hash.
    job_hashes: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)
    #: Each element's job spec as the store keeps it (``config.job_to_json``).
    job_jsons: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False)

    @_stored.default
    def _spec_texts(self) -> tuple[tuple[str, str], ...]:
        from runjob_core.config._spec_texts import spec_texts

        return tuple(spec_texts(self.jobs))

    @job_hashes.default
    def _job_hashes(self) -> tuple[str, ...]:
        return tuple(spec_hash for _json, spec_hash in self._stored)

    @job_jsons.default
    def _job_jsons(self) -> tuple[str, ...]:
        return tuple(text for text, _hash in self._stored)

    @property
    def spec_hash(self) -> str:
        """The elements' names and spec hashes: the same sweep whatever the key order or
        ``max_parallel`` (a rerun with another bound is the same sweep)."""
        parts = [[e.name, h] for e, h in zip(self.elements, self.job_hashes)]
        return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:16]

    def elements_record(self) -> list[dict[str, Any]]:
        return [{"index": e.index, "name": e.name, "values": e.values, "job": j.name, "spec_hash": h}
                for e, j, h in zip(self.elements, self.jobs, self.job_hashes)]


_TOP_LEVEL_SWEEP = re.compile(rb"^sweep[ \t]*:", re.MULTILINE)


def is_sweep_file(path: Path) -> bool:
    """Whether the YAML at *path* has a top-level ``sweep:`` key (a line starting ``sweep:``;
    not a YAML parse: every ``runjob run`` asks). One written otherwise (flow style) is caught
    by the job loader, whose error says it is a sweep."""
    try:
        return _TOP_LEVEL_SWEEP.search(path.read_bytes()) is not None
    except OSError:
        return False  # the job loader says what is wrong with the path


def load_sweep(path: Path, *, allow_large: bool = False) -> Sweep:
    source, base_dir = str(path), str(path.parent.resolve())
    raw = config.read_yaml(path)
    return sweep_from_mapping(raw, source=source, base_dir=base_dir, allow_large=allow_large)


def sweep_from_mapping(raw: Any, *, source: str, base_dir: str = ".", allow_large: bool = False) -> Sweep:
    if not isinstance(raw, dict) or "sweep" not in raw:
        raise ConfigError(source, [f"{source}: no 'sweep:' key at $; this is a job of its own, not a sweep"])
    if not isinstance(raw.get("name"), str):
        raise ConfigError(source, [f"{source}: $.name: a sweep needs a name (each element's job is NAME-<values>)"])
    from runjob_core.sweep._paused import collector_paused

    with collector_paused():  # ~20,000 objects a 1,000-element sweep keeps (its specs and their texts)
        elements = expand_sweep(raw, source, allow_large=allow_large)
        jobs, problems = element_specs(elements, source=source, base_dir=base_dir)
        if problems:
            more = [f"... and {len(problems) - _SHOWN} more"] if len(problems) > _SHOWN else []
            raise ConfigError(source, problems[:_SHOWN] + more)
        keys = list(dict.fromkeys(k for e in elements for k in e.values))
        varying = tuple(k for k in keys if len({json.dumps(e.values.get(k), sort_keys=True, default=str) for e in elements}) > 1)
        return Sweep(name=raw["name"], source=source, base_dir=base_dir, spec=raw, elements=tuple(elements), jobs=tuple(jobs),
                     max_parallel=raw["sweep"].get("max_parallel"), varying=varying)
