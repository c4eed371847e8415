"""One round trip for a submit: the job's files go with the backend's submit command.

A submit stages the job's folder (:func:`runjob_core.staging.stage`, one ``put_tree``) and
then the backend runs its submit command (``sbatch``): two remote commands, each a round
trip of the shared connection (~16 ms on the test cluster, more on a real one). For the
length of one submit, :class:`HeldTree` holds the ``put_tree`` back until the next remote
call; when that call is a ``run`` without input and the transport can do both at once
(``run_with_tree``: SSH, directly or through the agent), they go as one command. Any other
call writes the files first, as before, so whatever a backend does sees them in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runjob_core.transport.execute import Completed


def hold_tree(transport: Any) -> Any:
    """*transport*, or a :class:`HeldTree` over it where it can carry files with a command."""
    return HeldTree(transport) if callable(getattr(transport, "run_with_tree", None)) else transport


class HeldTree:
    """A transport whose ``put_tree`` waits for the next remote call (see the module)."""

    def __init__(self, transport: Any) -> None:
        self._inner = transport
        self._tree: tuple[str, dict[str, tuple[str, int]], tuple[str, ...]] | None = None

    def put_tree(self, root: str, files: dict[str, tuple[str, int]], *, also_make: Sequence[str] = ()) -> None:
        self.flush()
        self._tree = (root, dict(files), tuple(also_make))

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float | None = None,
            idempotent: bool = True) -> Completed:
        tree, self._tree = self._tree, None
        if tree is not None and input is None:
            return self._inner.run_with_tree(tree, argv, timeout=timeout, idempotent=idempotent)
        if tree is not None:
            self._inner.put_tree(tree[0], tree[1], also_make=tree[2])
        return self._inner.run(argv, input=input, timeout=timeout, idempotent=idempotent)

    def flush(self) -> None:
        """Write the held files now (nothing when none are held)."""
        tree, self._tree = self._tree, None
        if tree is not None:
            self._inner.put_tree(tree[0], tree[1], also_make=tree[2])

    def __getattr__(self, name: str) -> Any:
        # Every other method (put_text, stat, run_shell...) sees the files in place.
        self.flush()
        return getattr(self._inner, name)
