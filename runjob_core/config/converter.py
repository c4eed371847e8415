"""The one private cattrs converter: raw mappings (YAML, JSON) into frozen records.

Strict about types and unknown keys; every problem becomes one line naming the key path
and, for a misspelled key, the closest known one. Imported only when a file is really
parsed: a command whose job and cluster files are unchanged loads them from the spec
cache (``_spec_cache``) and never pays for cattrs.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from runjob_core.config._describe import describe_value
from runjob_core.errors import ConfigError

T = TypeVar("T")


class _ValueProblem(ValueError):
    """A value of the right shape but not acceptable; its text is shown as is."""


def _strict_str(value: Any, _type: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _ValueProblem(f"expected a string, got {describe_value(value)}")


def _strict_int(value: Any, _type: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _ValueProblem(f"expected an integer, got {describe_value(value)}")


def _strict_float(value: Any, _type: type) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _ValueProblem(f"expected a number, got {describe_value(value)}")


def _strict_bool(value: Any, _type: type) -> bool:
    if isinstance(value, bool):
        return value
    raise _ValueProblem(f"expected true or false, got {describe_value(value)}")


def _str_tuple(value: Any, _type: type) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(_strict_str(v, str) for v in value)
    raise _ValueProblem(f"expected a list of strings, got {describe_value(value)}")


def _str_dict(value: Any, _type: type) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _ValueProblem(f"expected a mapping, got {describe_value(value)}")
    return {str(k): _strict_str(v, str) for k, v in value.items()}


def _any_dict(value: Any, _type: type) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _ValueProblem(f"expected a mapping, got {describe_value(value)}")
    return {str(k): v for k, v in value.items()}


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    # Generic aliases are not classes: match them with predicates.
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _str_tuple)
    converter.register_structure_hook_func(lambda t: t == dict[str, str], _str_dict)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _any_dict)
    return converter





def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown key " + ", ".join(repr(k) for k in sorted(exc.extra_fields))
    if isinstance(exc, _ValueProblem):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, (TypeError, ValueError)) and type_ is not None:
        name = getattr(type_, "__name__", str(type_))
        return f"invalid value, expected {name}"
    return cattrs.v.format_exception(exc, type_)


def structure(raw: Any, cls: type[T], *, source: str, path: str = "$") -> T:
    """Structure *raw* into *cls*, reporting every problem with its full key path."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, [f"expected a mapping at {path} in {source}, got {describe_value(raw)}"])
    try:
        return converter().structure(dict(raw), cls)
    except (ClassValidationError, IterableValidationError) as exc:
        problems = []
        for line in cattrs.transform_error(exc, path=path, format_exception=_format_exception):
            message, _, where = line.rpartition(" @ ")
            problems.append(f"{message} at {where} in {source}{_hint(message, '$' + where[len(path):], cls)}" if where else line)
        raise ConfigError(source, problems) from None


def _hint(message: str, where: str, cls: type) -> str:
    match = re.match(r"unknown key '([^']+)'$", message)
    if not match:
        return ""
    known = _known_keys_at(cls, where)
    close = difflib.get_close_matches(match.group(1), known, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; known keys: {', '.join(known)}" if known else ""


def _known_keys_at(cls: type, where: str) -> list[str]:
    current: Any = cls
    for part in [p for p in where.split(".")[1:] if p]:
        if not attrs.has(current):
            return []
        fields = {f.name: f for f in attrs.fields(current)}
        if part not in fields:
            return []
        current = fields[part].type
    if not attrs.has(current):
        return []
    return [f.name for f in attrs.fields(current) if f.name not in ("source", "base_dir", "name")]


@functools.cache
def converter() -> cattrs.Converter:
    return _make_converter()


def from_plain(data: Any, cls: type[T]) -> T:
    """Rebuild a record from its unstructured form (as stored in the state database)."""
    return converter().structure(data, cls)
