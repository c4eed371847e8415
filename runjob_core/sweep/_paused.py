"""The cyclic garbage collector paused while a sweep's elements are made.

A 1,000-element sweep makes ~100,000 objects that live until its submit ends (specs, rows,
rendered scripts): allocating them ran ~130 young collections and one of the whole heap (a
warm child's heap is every preloaded module: ~25 ms of a ~450 ms submit), which find nothing
to free since the objects are still in use. Reference counting frees as ever; what is cyclic
is collected at the next collection after the block.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """Pause automatic collection for the block (not nested pauses' business: one that was
    already off stays off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
