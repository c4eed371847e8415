"""The --json encoder (runjob_core/cli/_jsonout.py) writes what json.dumps(indent=2, default=str) writes."""

from __future__ import annotations

import enum
import json
import math
import random
from pathlib import Path

import pytest

from runjob_core.cli import _jsonout


class Colour(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def _value(rng: random.Random, depth: int):
    kinds = ["str", "int", "float", "bool", "none", "path", "special"] + (["list", "dict", "tuple"] * 2 if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(["", "plain", "quote \" back \\ slash", "tab\tnew\nline", "é ü 中文 \U0001f600", "\x00\x1f"])
    if kind == "int":
        return rng.choice([0, -1, 7, 2**70, -(2**63)])
    if kind == "float":
        return rng.choice([0.0, -0.0, 1.5, 1e-300, 1e300, 123456.789, math.nan, math.inf, -math.inf])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "none":
        return None
    if kind == "path":
        return Path("/tmp/x y")
    if kind == "special":
        return rng.choice([Colour.RED, Level.HIGH, {1, 2} and frozenset(), b"bytes"])
    if kind == "tuple":
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["a", "", "ключ", 1, 2.5, True, False, None, -3]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 5))}


@pytest.mark.parametrize("seed", range(40))
def test_the_same_text_as_json_dumps(seed):
    data = _value(random.Random(seed), 0)
    assert _jsonout.dumps(data) == json.dumps(data, indent=2, default=str)


def test_a_status_listing_reads_back_the_same():
    rows = [{"id": f"rj-{i}", "who": None, "created_at": 1.5 + i, "attempts": [{"n": 1, "exit_code": 0, "gpus": []}]}
            for i in range(100)]
    text = _jsonout.dumps(rows)
    assert text == json.dumps(rows, indent=2, default=str)
    assert json.loads(text) == rows


def test_a_cycle_is_an_error_as_in_json():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        _jsonout.dumps(loop)


def test_a_key_json_cannot_write_is_an_error_as_in_json():
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 1}, indent=2)
    with pytest.raises(TypeError):
        _jsonout.dumps({(1, 2): 1})
