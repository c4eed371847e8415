"""One element of a sweep addressed where a job id or name is taken: ``SWEEP/ELEMENT``.

``SWEEP`` is the sweep's name or id; ``ELEMENT`` is its index (``grid/4``), its element name
(``grid/lr-0.3_seed-2``) or its values (``grid/lr=0.3,seed=2``; a key may be given by its last
part, ``name`` for ``model.name``). Job and sweep names never hold ``/``, ``=`` or ``,``, and
none of the three means anything to a shell, so the reference needs no quoting and cannot be
mistaken for a job's name. Every command that takes a job (status, report, logs, cancel,
resume, watch, events, collect, forget) and the Python API resolve it through
:func:`find_job`; a reference that names no element, or several, is one error line saying
which elements there are.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from runjob_core.errors import JobNotFoundError
from runjob_core.store import JobRow, SweepRow

#: Between the sweep and the element; ``,`` between values, ``=`` between key and value.
SEPARATOR = "/"


@attrs.frozen
class Addressed:
    """The sweep, the element's index and its record (``{"index", "name", "values", "job"}``),
    and its latest job (None while the element has not been submitted)."""

    sweep: SweepRow
    index: int
    element: dict[str, Any]
    job: JobRow | None


def is_element_ref(ref: str) -> bool:
    return SEPARATOR in ref


def find_job(store, ref: str) -> JobRow:
    """The job *ref* names: a job id or name, or an element ``SWEEP/ELEMENT`` (its latest job).
    An element not submitted yet raises :class:`JobNotFoundError` saying how to start it."""
    if not is_element_ref(ref):
        return store.find_job(ref)
    found = resolve(store, ref)
    if found.job is None:
        raise JobNotFoundError(
            f"{ref}: element {found.index} ({found.element['name']}) of sweep {found.sweep.name} has not been "
            f"submitted yet (it waits for a free slot, or pre-flight refused it); `runjob resume {ref}` "
            "starts it")
    return found.job


def resolve(store, ref: str) -> Addressed:
    """The element *ref* (``SWEEP/ELEMENT``) names; :class:`JobNotFoundError` otherwise."""
    sweep_ref, _, selector = ref.partition(SEPARATOR)
    sweep = store.find_sweep(sweep_ref) if sweep_ref else None
    if sweep is None:
        raise JobNotFoundError(f"{ref}: no sweep with name or id {sweep_ref!r} in {store.path} "
                               f"(SWEEP/ELEMENT: a sweep's name or id, then an element's index, name or key=value,...)")
    elements = sweep.elements
    index = _select(ref, sweep, elements, selector)
    from runjob_core.sweep._run import element_jobs

    return Addressed(sweep=sweep, index=index, element=elements[index], job=element_jobs(store, sweep.id).get(index))


def ref_of(sweep: SweepRow | str, index: int) -> str:
    """The reference of element *index* of *sweep* (a row, or its id or name)."""
    return f"{sweep if isinstance(sweep, str) else sweep.id}{SEPARATOR}{index}"


def _select(ref: str, sweep: SweepRow, elements: list[dict], selector: str) -> int:
    count = len(elements)
    if selector.isdigit():
        if int(selector) < count:
            return int(selector)
        raise JobNotFoundError(f"{ref}: sweep {sweep.name} has {count} elements (0 to {count - 1}); no element {selector}")
    if "=" not in selector:
        for element in elements:
            if element["name"] == selector:
                return element["index"]
        raise JobNotFoundError(f"{ref}: sweep {sweep.name} has no element {selector!r} (an index 0 to {count - 1}, "
                               f"an element name such as {elements[0]['name']!r}, or key=value,...)")
    wanted = _pairs(ref, selector)
    keys = list(dict.fromkeys(k for e in elements for k in e["values"]))
    matching = list(range(count))
    for given, text in wanted:
        key = _key(ref, sweep, keys, given)
        matching = [i for i in matching if key in elements[i]["values"] and _equal(elements[i]["values"][key], text)]
        if not matching:
            taken = sorted({_shown(e["values"][key]) for e in elements if key in e["values"]})
            raise JobNotFoundError(f"{ref}: no element of sweep {sweep.name} has {given}={text}"
                                   + (" with the other values given" if len(wanted) > 1 else "")
                                   + f" ({key} takes {', '.join(taken)})")
    if len(matching) > 1:
        shown = ", ".join(f"{i} ({elements[i]['name']})" for i in matching[:6]) + (" ..." if len(matching) > 6 else "")
        given = {_key(ref, sweep, keys, g) for g, _t in wanted}
        rest = [k for k in keys if k not in given]
        raise JobNotFoundError(f"{ref}: {len(matching)} elements of sweep {sweep.name} match ({shown}); "
                               f"give {', '.join(rest) or 'the index'} too")
    return matching[0]


def _pairs(ref: str, selector: str) -> list[tuple[str, str]]:
    pairs = []
    for part in selector.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise JobNotFoundError(f"{ref}: {part!r} is not key=value (SWEEP/lr=0.1,seed=2)")
        pairs.append((key, value))
    return pairs


def _key(ref: str, sweep: SweepRow, keys: list[str], given: str) -> str:
    if given in keys:
        return given
    tails = [k for k in keys if k.rsplit(".", 1)[-1] == given]
    if len(tails) == 1:
        return tails[0]
    if len(tails) > 1:
        raise JobNotFoundError(f"{ref}: {given!r} is ambiguous in sweep {sweep.name} ({', '.join(tails)}); give the whole key")
    raise JobNotFoundError(f"{ref}: sweep {sweep.name} sweeps no key {given!r} (its keys: {', '.join(keys)})")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _equal(value: Any, text: str) -> bool:
    """Whether the value an element has is what *text* says: as written (``0.1``, ``true``,
    ``Qwen/Qwen3-8B``), or the same YAML scalar (``1e-3`` for 0.001, ``1.0`` for 1)."""
    if _shown(value) == text or str(value) == text:
        return True
    import yaml

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if isinstance(value, bool) or isinstance(parsed, bool):
        return value is parsed
    if isinstance(value, (int, float)):
        try:
            return float(value) == float(text)  # 1e-3 (YAML 1.1 reads it as a string), 1.0 for 1
        except ValueError:
            return False
    return parsed == value
