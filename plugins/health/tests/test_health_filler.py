"""Every regex of the health checks over 1 MiB of adversarial filler (issue 34 item 4).

A line with no end is checked in 1 MiB pieces, so each pattern must take time linear in the
piece whatever it holds. A pattern that backtracks over a run of digits, spaces or a
repeated key from every start position takes minutes on one piece (a leading ``\\d+`` before
``/``: 1.5 s on 32 KiB of digits, about 25 min on 1 MiB; the loss key's open-ended class on
"lossloss...": 9.6 s on 32 KiB). The patterns are run the way the scanner runs them
(``search``/``finditer``, ``match`` for the ones anchored at a record's start). A quadratic
pattern makes this test run for hours instead of seconds: no time limit is asserted.
"""

from __future__ import annotations

import re

import pytest

from runjob_health import _patterns as P
from runjob_health import _scan

PIECE = 1 << 20
FILLERS = {
    "digits": b"0123456789",
    "spaces": b" ",
    "loss": b"loss",
    "grad_norm": b"grad_norm",
    "loss-key": b"loss_",
    "digit-space": b"1 ",
    "loss-value": b"loss 1 ",
    "killed": b"Killed ",
    "bar": b"| 1/2 [",
    "errors": b"Error: ",
    "quotes": b'File "',
    "tabs": b"\t",
    "word": b"a",
    "dotted": b"a.",
    "percent": b"1%",
}
#: structural regexes the scanner only runs with .match (at a record's or a prefix's start)
MATCHED = {"exc", "struct", "bar_end"}


def _regexes():
    """(name, compiled, how) for every regex the scanner runs on a record."""
    out = [(f"label {label}", re.compile(b"|".join(b"(?:" + p + b")" for p in patterns)), "search")
           for label, patterns in P.LABEL_PATTERNS.items()]
    for i, family in enumerate(P.FAMILIES):
        for j, pattern in enumerate(family.patterns):
            out.append((f"family {i} ({family.label}) pattern {j}", re.compile(pattern), "search"))
        if family.exclude:
            out.append((f"family {i} ({family.label}) exclude", re.compile(family.exclude), "search"))
    for name, source in _scan._Compiled._SOURCES.items():
        out.append((f"structure {name}", re.compile(source), "match" if name in MATCHED else "search"))
    out.append(("token count", re.compile(P.TOKEN_COUNT), "search"))
    return out


@pytest.mark.parametrize("filler", sorted(FILLERS))
def test_every_pattern_is_linear_on_a_mib_of_filler(filler):
    unit = FILLERS[filler]
    piece = (unit * (PIECE // len(unit) + 1))[:PIECE]
    for name, rx, how in _regexes():
        if how == "match":
            rx.match(piece)
        else:
            for _ in rx.finditer(piece):
                pass
