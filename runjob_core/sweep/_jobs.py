"""A sweep's elements as job specs, the sections no value of theirs changes made once.

Each element's spec is the sweep's spec with its values set (``_spec.expand_sweep``): its
top-level sections that none of its keys addresses (``resources`` when it sweeps ``lr``)
are equal in every element. Such a section is checked and structured once and the one
record is every such element's (what ``config.job_from_mapping`` would make of it, equal
field for field); only the element's own sections (its name, ``params``, ``model``...) are
structured for it, and the whole job is checked as ever (``config._check_job``). Sharing
the records is also what lets the elements' spec texts be written once per section
(:mod:`runjob_core.config._spec_texts`): a 1,000-element grid over a param structured each
element whole (~30 us) and wrote every section of it twice (~45 us).

Anything this path does not take plainly (a problem in a section, a key the spec does not
know, a token-shaped value) sends the element to ``config.job_from_mapping``, whose
``ConfigError`` names the key path as for any job: errors are its own, word for word.
"""

from __future__ import annotations

import typing
from typing import Any

from runjob_core import config
from runjob_core.errors import ConfigError
from runjob_core.models import JobSpec
from runjob_core.sweep._spec import SweepElement, _target

#: A section this path leaves to ``config.job_from_mapping`` (which says what is wrong with it).
_NOT_PLAIN = object()


def element_specs(elements: list[SweepElement], *, source: str, base_dir: str) -> tuple[list[JobSpec], list[str]]:
    """Each element's job spec, in order, and the problems of those that are not valid jobs
    (``sweep element I (NAME): ...``, every problem of each)."""
    from cattrs.errors import BaseValidationError

    from runjob_core.config import converter as _converter
    from runjob_core.config import guard

    types = {name: hint for name, hint in typing.get_type_hints(JobSpec).items() if name not in ("source", "base_dir")}
    structure = _converter.converter().structure
    shared: dict[str, Any] = {}  # top-level key -> its record, for the elements none of whose keys address it
    tops: dict[str, str] = {}  # a swept key -> the top-level key it sets (``lr``: params)

    def section(key: str, value: Any) -> Any:
        if guard.token_problems(value, source):
            return _NOT_PLAIN
        try:
            return structure(value, types[key])
        except (BaseValidationError, ValueError, TypeError, KeyError, AttributeError):
            return _NOT_PLAIN

    def fast(element: SweepElement) -> JobSpec | None:
        raw = element.spec
        for key in element.values:
            if key not in tops:
                tops[key] = _target(str(key)).split(".")[0]
        own = {"name", *(tops[key] for key in element.values)}
        fields: dict[str, Any] = {"source": source, "base_dir": base_dir}
        for key, value in raw.items():
            if key not in types:
                return None
            if key in own:
                made = section(key, value)
            else:
                if key not in shared:
                    shared[key] = section(key, value)
                made = shared[key]
            if made is _NOT_PLAIN:
                return None
            fields[key] = made
        try:
            job = JobSpec(**fields)
        except TypeError:  # a required key missing
            return None
        return None if config._check_job(job, source) else job

    jobs, problems = [], []
    for element in elements:
        job = fast(element) if isinstance(element.spec, dict) else None
        if job is None:
            try:
                job = config.job_from_mapping(element.spec, source=source, base_dir=base_dir)
            except ConfigError as exc:
                problems += [f"sweep element {element.index} ({element.name}): {p}" for p in exc.problems]
                continue
        jobs.append(job)
    return jobs, problems
