"""The helpers of the backend kit that :mod:`runjob_core.testing.contract` uses too (a floor
below ``runjob_core.testing``, which re-exports them: the two no longer import each other)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runjob_core.models import ClusterConfig


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
            input: str | None = None, check: int | None = None) -> Any:
    """Run the installed ``runjob`` command as a user would (a new process), output captured;
    with *check*, assert it exited with that code (the failure shows its output)."""
    import subprocess
    import sys

    runjob = str(Path(sys.executable).parent / "runjob")
    result = subprocess.run([runjob, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, input=input,
                            env={**os.environ, "COLUMNS": "200", **(env or {})})
    if check is not None:
        assert result.returncode == check, (result.stdout, result.stderr)
    return result


def one_line_error(result: Any) -> str:
    """The one line a failed command printed, asserting it failed without a traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def write_clusters_yaml(path: Path, clusters: Sequence[ClusterConfig]) -> Path:
    import yaml

    from runjob_core.config import unstructure

    data = {}
    for cluster in clusters:
        entry = {k: v for k, v in unstructure(cluster).items() if k not in ("name", "source") and v not in (None, [], {}, ())}
        # A backend's own keys (cluster.options) sit flat in the entry, beside the core's.
        entry.update({k: v for k, v in (entry.pop("options", None) or {}).items() if v not in (None, [], {}, ())})
        data[cluster.name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"clusters": data}, sort_keys=False))
    return path


def wait_until(predicate: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll *predicate* until it returns something truthy (a deadline for waiting, not a speed limit)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
