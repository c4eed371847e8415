"""Shared timing helpers for the benchmarks: medians over repetitions, printed as ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence


def time_call(fn: Callable[[], object], reps: int) -> list[float]:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def time_interleaved(fns: Sequence[Callable[[], object]], reps: int) -> list[list[float]]:
    """Samples of each of *fns*, run in turn each repetition, so that load changes on the
    machine (2 cores, other work) hit all of them alike rather than whichever ran last."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, into in zip(fns, samples):
            into.extend(time_call(fn, 1))
    return samples


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def show(title: str, rows: list[tuple[str, list[float]]], *, target: str | None = None) -> float:
    """Print medians (with min-max) and each row's ratio to the first; return the last ratio."""
    print(f"\n{title}")
    base = median_ms(rows[0][1])
    ratio = 1.0
    for label, samples in rows:
        value = median_ms(samples)
        ratio = value / base if base else float("nan")
        print(f"  {label:<58} {value:9.1f} ms  ({min(samples) * 1000:.1f}-{max(samples) * 1000:.1f})  {ratio:5.2f}x")
    if target:
        print(f"  target: {target}")
    return ratio


def checkout_pythonpath(checkout: str) -> str:
    """PYTHONPATH that runs another checkout's runjob (say main before a change) with this
    interpreter: its core and each of its plugins' sources, ahead of the installed ones."""
    from pathlib import Path

    root = Path(checkout).resolve()
    return ":".join([str(root), *sorted(str(p) for p in root.glob("plugins/*/src"))])
