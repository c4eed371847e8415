"""Wall-time estimate of a job and how many resume segments it needs."""

from __future__ import annotations

import math
from typing import Any

from runjob_core.errors import RunjobError


def _hms(seconds: float) -> str:
    s = int(math.ceil(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def estimate_walltime(
    samples: int | float,
    throughput_per_s: float,
    requested_seconds: float | None = None,
    partition_limit_seconds: float | None = None,
) -> dict[str, Any]:
    """Time to process ``samples`` at ``throughput_per_s`` samples per second.

    Returns ``walltime_seconds`` (and ``walltime`` as ``[D-]HH:MM:SS``), whether it exceeds the
    requested time and the partition's limit, the binding ``limit_seconds`` (the smaller of
    the two given), and ``segments``: ``ceil(walltime / limit)`` when the walltime exceeds
    the limit (the job must checkpoint and resume that many times), else 1.
    """
    if samples is None or samples < 0:
        raise RunjobError(f"samples must be >= 0, got {samples!r}")
    if throughput_per_s is None or throughput_per_s <= 0:
        raise RunjobError(f"throughput_per_s must be > 0, got {throughput_per_s!r}")
    for label, v in (("requested_seconds", requested_seconds), ("partition_limit_seconds", partition_limit_seconds)):
        if v is not None and v <= 0:
            raise RunjobError(f"{label} must be > 0, got {v!r}")
    walltime = float(samples) / float(throughput_per_s)
    limits = [x for x in (requested_seconds, partition_limit_seconds) if x is not None]
    limit = float(min(limits)) if limits else None
    exceeds_requested = requested_seconds is not None and walltime > requested_seconds
    exceeds_partition = partition_limit_seconds is not None and walltime > partition_limit_seconds
    segments = math.ceil(walltime / limit) if limit is not None and walltime > limit else 1
    return {
        "samples": samples,
        "throughput_per_s": throughput_per_s,
        "walltime_seconds": walltime,
        "walltime": _hms(walltime),
        "requested_seconds": requested_seconds,
        "partition_limit_seconds": partition_limit_seconds,
        "limit_seconds": limit,
        "exceeds_requested": exceeds_requested,
        "exceeds_partition_limit": exceeds_partition,
        "segments": segments,
    }
