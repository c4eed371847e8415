"""How an error message names a value it did not expect (a floor below the config wing's
``__init__`` and its converter, which both use it)."""

from __future__ import annotations

from typing import Any


def describe_value(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__}"
    return repr(value)
