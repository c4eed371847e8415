"""Expand a spec's top-level ``sweep:`` key into elements; errors name the key path."""

from __future__ import annotations

import copy
import itertools
import re
import typing
from typing import Any

import attrs

from runjob_core.errors import ConfigError
from runjob_core.models import JobSpec

LARGE_GRID = 10_000
_KNOWN = {"params", "include", "max_parallel", "name"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@attrs.frozen
class SweepElement:
    index: int
    name: str
    values: dict[str, Any]
    spec: dict[str, Any]


def _set_path(spec: dict[str, Any], dotted: str, value: Any) -> None:
    node = spec
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value


def _target(key: str) -> str:
    # A bare key is a param; a dotted key or a top-level JobSpec field addresses the spec.
    fields = {f.name for f in attrs.fields(JobSpec)}
    return key if "." in key or key in fields else f"params.{key}"


#: Spec fields a sweep may not set: the element's name is built, where the spec was read is not an experiment.
_NOT_SWEPT = {"name", "source", "base_dir", "sweep"}


def _unknown_target(key: str) -> str | None:
    """Why *key* (``lr``, ``model.name``, ``resources.gpus``) addresses no spec field, or None."""
    parts = _target(key).split(".")
    cls: Any = JobSpec
    for depth, part in enumerate(parts):
        if depth == 0 and part in _NOT_SWEPT:
            return f"'{part}' cannot be swept (each element's name is the spec's name plus its suffix)"
        if not attrs.has(cls):
            return None  # inside params / env / columns: any key
        hints = typing.get_type_hints(cls)
        if part not in hints:
            where = ".".join(parts[:depth]) or "the job spec"
            known = ", ".join(sorted(f.name for f in attrs.fields(cls) if depth or f.name not in _NOT_SWEPT))
            return f"{where} has no field '{part}' (known: {known}); a bare key such as 'lr' sweeps params.lr"
        cls = hints[part]
    return None


def _suffix(values: dict[str, Any]) -> str:
    parts = [f"{k.split('.')[-1]}-{v}" for k, v in values.items()]
    return _UNSAFE.sub("_", "_".join(parts)).strip("_") or "element"


def expand_sweep(spec: dict[str, Any], source: str, *, allow_large: bool = False) -> list[SweepElement]:
    """The grid of ``sweep.params`` plus ``sweep.include``; one element per variant."""
    sweep = spec.get("sweep")
    if not isinstance(sweep, dict):
        raise ConfigError(source, [f"{source}: sweep: expected a mapping with params: and/or include:"])
    problems = [f"{source}: sweep.{k}: unknown key (known: {', '.join(sorted(_KNOWN))})" for k in sweep if k not in _KNOWN]
    params = sweep.get("params") or {}
    include = sweep.get("include") or []
    if not isinstance(params, dict):
        problems.append(f"{source}: sweep.params: expected a mapping of key to a list of values")
        params = {}
    for key, vals in params.items():
        if not isinstance(vals, list) or not vals:
            problems.append(f"{source}: sweep.params.{key}: expected a non-empty list of values")
        if (why := _unknown_target(str(key))) is not None:
            problems.append(f"{source}: sweep.params.{key}: {why}")
    if not isinstance(include, list) or not all(isinstance(v, dict) and v for v in include):
        problems.append(f"{source}: sweep.include: expected a list of non-empty mappings")
        include = []
    for number, variant in enumerate(include):
        for key in variant:
            if (why := _unknown_target(str(key))) is not None:
                problems.append(f"{source}: sweep.include[{number}].{key}: {why}")
    limit = sweep.get("max_parallel")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        problems.append(f"{source}: sweep.max_parallel: expected a whole number >= 1, got {limit!r}")
    template = sweep.get("name")
    if template is not None and not isinstance(template, str):
        problems.append(f"{source}: sweep.name: expected a template string such as '{{index}}-{{lr}}'")
    if not params and not include:
        problems.append(f"{source}: sweep: give params: or include: (both are empty)")
    if problems:
        raise ConfigError(source, problems)
    keys = list(params)
    variants = [dict(zip(keys, combo)) for combo in itertools.product(*(params[k] for k in keys))] if keys else []
    variants += [dict(v) for v in include]
    if len(variants) > LARGE_GRID and not allow_large:
        raise ConfigError(source, [f"{source}: sweep.params: {len(variants)} elements exceed {LARGE_GRID}; pass --yes-large to run them"])
    base = {k: v for k, v in spec.items() if k != "sweep"}
    elements, seen = [], set()
    for index, values in enumerate(variants):
        try:
            suffix = template.format(index=index, **{k.replace(".", "_"): v for k, v in values.items()}) if template else _suffix(values)
        except (KeyError, IndexError) as exc:
            raise ConfigError(source, [f"{source}: sweep.name: template names {exc} which is not a swept key"]) from None
        suffix = _UNSAFE.sub("_", suffix)
        name = suffix if suffix not in seen else f"{suffix}_{index}"
        seen.add(name)
        element_spec = copy.deepcopy(base)
        for key, value in values.items():
            _set_path(element_spec, _target(key), value)
        if isinstance(base.get("name"), str):
            element_spec["name"] = f"{base['name']}-{name}"
        elements.append(SweepElement(index=index, name=name, values=values, spec=element_spec))
    return elements
