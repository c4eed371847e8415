"""The kit's rule helper, the jobs it runs and its hook spy (:mod:`runjob_core.testing.contract`)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any


from runjob_core import hookimpl as _hookimpl  # the one marker (runjob_core.__init__)


class ContractBroken(AssertionError):
    """A contract rule the backend under test broke."""

    def __init__(self, rule: str, message: str) -> None:
        self.rule = rule
        super().__init__(f"contract rule {rule!r} broken: {message}")


def rule(name: str, holds: Any, message: str) -> None:
    if not holds:
        raise ContractBroken(name, message)


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " / ".join(kept) or "(nothing)"


#: The files a results-writing job leaves under $RUNJOB_RESULTS (a nested tree).
NESTED_FILES = {
    "results.jsonl": "".join(f'{{"id": {i}, "response": "r{i}", "score": 1.0}}\n' for i in range(3)),
    "sub dir/meta.json": '{"model": "m"}\n',
    "sub dir/deeper/notes.txt": "deep\n",
    "it's here.txt": "quoted\n",
}
_WRITE_NESTED = "\n".join(
    f'mkdir -p "$RUNJOB_RESULTS"/{shlex.quote(str(Path(name).parent))} && printf %s {shlex.quote(content)} '
    f'> "$RUNJOB_RESULTS"/{shlex.quote(name)}'
    for name, content in NESTED_FILES.items()
)
#: A job that shows it is alive: a counter in $RUNJOB_RESULTS/heartbeat, five times a second.
_HEARTBEAT = 'i=0; while true; do i=$((i+1)); echo "$i" > "$RUNJOB_RESULTS/heartbeat"; sleep 0.2; done'


class _HookSpy:
    """A non-backend plugin wrapping hooks to count calls (it takes part in routed calls)."""

    def __init__(self) -> None:
        self.submits = 0
        self.polls: list[int] = []

    @_hookimpl(wrapper=True)
    def runjob_submit(self, job):
        self.submits += 1
        return (yield)

    @_hookimpl(wrapper=True)
    def runjob_poll(self, submissions):
        self.polls.append(len(submissions))
        return (yield)
