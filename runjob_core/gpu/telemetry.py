"""GPU telemetry: what the job script samples with nvidia-smi, read by the monitor like its
metrics, summed up for the report, and watched for idle GPUs and full memory.

The job script (the base template) appends ``nvidia-smi --query-gpu=TELEMETRY_FIELDS -l N``
lines to ``<log>.gpu.csv`` on every backend whose node has nvidia-smi. The monitor reads the
new complete lines at most once per sample interval per job (:func:`observe`), stores them as
metric series ``gpu<index>.util`` (percent), ``gpu<index>.mem_mib`` and ``gpu<index>.power_w``
(source ``gpu``), and keeps in ``context.core_memory.gpu`` what the idle and memory checks
of :mod:`runjob_core.defaults.gpu_health` need. The report's ``gpu`` section comes from the stored series
(:func:`usage`), so it survives the monitor.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from runjob_core.gpu import IDLE_PERCENT, Sample, parse_telemetry

SUFFIX = ".gpu.csv"
SOURCE = "gpu"
#: The telemetry file's read offset, kept with the log offsets.
_STREAM = "gpu"
#: At most this much telemetry per job per cycle; the rest comes next cycle.
MAX_READ_BYTES = 1 << 20
_SERIES = ("util", "mem_mib", "power_w")
#: GPU indices ``runjob status`` looks for (nodes have 8 at most today; 16 leaves room).
MAX_GPUS_PER_NODE = 16
#: Ended idle spells kept per GPU for the checks (the newest ones).
MAX_SPELLS = 20


def path_of(submission) -> str:
    return submission.log_path + SUFFIX


def state(context, tag: str) -> dict[str, Any]:
    """What the checks need of one attempt's GPUs: per GPU index, the time it went idle
    (``idle_since``, None while busy), the idle spells that ended (``spells``: (start, end)),
    the last sample time, memory used and total."""
    return context.core_memory.gpu.gpus.setdefault(tag, {})


def observe(context, transport, job, attempt, submission, status) -> int:
    """Read the attempt's new telemetry lines into the store; returns how many samples."""
    interval = job.health.gpu_sample_seconds
    if not interval or job.resources.gpus <= 0:
        return 0
    due = context.core_memory.gpu.next_read
    now = time.monotonic()
    if not status.terminal and now < due.get(attempt.tag, 0.0):
        return 0  # nothing new can have been sampled yet: spare the (remote) read
    due[attempt.tag] = now + interval
    store = context.store
    offset = store.offset(attempt.job_id, attempt.n, _STREAM)
    data = transport.read_from(path_of(submission), offset, MAX_READ_BYTES)
    cut = data.rfind(b"\n")
    if cut == -1:
        return 0
    samples, _skipped = parse_telemetry(data[: cut + 1].decode("utf-8", "replace"))
    points = []
    for s in samples:
        for name, value in zip(_SERIES, (s.util, s.memory_used_mib, s.power_w)):
            if value is not None:
                points.append((f"gpu{s.index}.{name}", None, s.ts, value))
    with store.transaction():
        store.add_metrics(attempt.job_id, attempt.n, points, source=SOURCE)
        store.set_offset(attempt.job_id, attempt.n, offset + cut + 1, _STREAM)
    _track(context, attempt, samples)
    return len(samples)


def _track(context, attempt, samples: list[Sample]) -> None:
    gpus = state(context, attempt.tag)
    for s in samples:
        gpu = gpus.get(s.index)
        if gpu is None:  # first sight in this process: the idle clock starts from the store
            gpu = gpus[s.index] = {"idle_since": _idle_since_stored(context, attempt, s.index)}
        if s.util is not None:
            if s.util < IDLE_PERCENT:
                gpu["idle_since"] = gpu["idle_since"] or s.ts
            elif gpu["idle_since"] is not None:
                # A spell that ended between two looks (read in one batch) is still news for the checks.
                gpu.setdefault("spells", []).append((gpu["idle_since"], s.ts))
                del gpu["spells"][:-MAX_SPELLS]
                gpu["idle_since"] = None
        gpu.update(last=s.ts, util=s.util, mem=s.memory_used_mib, total=s.memory_total_mib or gpu.get("total"))


def _idle_since_stored(context, attempt, index: int) -> float | None:
    """Start of the idle run at the end of the stored samples (a restarted monitor does not
    start the idle clock again)."""
    points = [p for p in context.store.metrics(attempt.job_id, series=(f"gpu{index}.util",)) if p[0] == attempt.n]
    since = None
    for _n, _series, _step, ts, value in sorted(points, key=lambda p: p[3] or 0.0):
        since = (since or ts) if value < IDLE_PERCENT else None
    return since


#: Only the GPU series, by name (the metrics index answers): a job's loss history can be long.
_GPU_SERIES = tuple(f"gpu{i}.{kind}" for i in range(MAX_GPUS_PER_NODE) for kind in ("util", "mem_mib"))
#: Attempt states whose telemetry ``runjob status`` shows.
_SHOWN = ("RUNNING", "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "LOST", "PREEMPTED", "NODE_FAIL")


def latest(store, job_id: str, attempt: int) -> dict[str, Any] | None:
    """The newest sample of each GPU of *attempt*: ``{"gpus": [{index, util, mem_mib}], "at": ts}``."""
    return _latest(store.metrics(job_id, series=_GPU_SERIES), attempt)


def _latest(points, attempt: int) -> dict[str, Any] | None:
    found: dict[int, dict[str, Any]] = {}
    for n, series, _step, ts, value in points:
        if n != attempt or not series.startswith("gpu") or "." not in series:
            continue
        head, name = series.split(".", 1)
        if not head[3:].isdigit() or name not in ("util", "mem_mib"):
            continue
        gpu = found.setdefault(int(head[3:]), {"index": int(head[3:])})
        if ts is not None and ts >= gpu.get(f"{name}_ts", float("-inf")):
            gpu[name], gpu[f"{name}_ts"] = value, ts
    if not found:
        return None
    gpus = [{"index": g["index"], "util": g.get("util"), "mem_mib": g.get("mem_mib")} for _, g in sorted(found.items())]
    return {"gpus": gpus, "at": max(g.get("util_ts", 0.0) for g in found.values())}


def usage(metrics: list[tuple]) -> dict[str, Any] | None:
    """The report's ``gpu`` section from a job's stored metric points: mean and peak
    utilisation, peak memory, idle GPU-hours (time below 5% utilisation, each sample counting
    until the next one of its GPU, at most twice that GPU's usual interval), per GPU too."""
    series: dict[tuple[int, int, str], list[tuple[float, float]]] = {}
    for n, name, _step, ts, value in metrics:
        if not name.startswith("gpu") or ts is None:
            continue
        head, _, kind = name.partition(".")
        if head[3:].isdigit() and kind in _SERIES:
            series.setdefault((n, int(head[3:]), kind), []).append((ts, value))
    utils = {k[:2]: sorted(v) for k, v in series.items() if k[2] == "util"}
    if not utils:
        return None
    idle_seconds, per_gpu = 0.0, {}
    for (n, index), points in utils.items():
        gaps = [b[0] - a[0] for a, b in zip(points, points[1:])]
        cap = 2 * statistics.median(gaps) if gaps else 0.0
        idle = sum(min(gap, cap) for gap, (_, value) in zip(gaps, points) if value < IDLE_PERCENT)
        idle_seconds += idle
        mem = [v for _, v in series.get((n, index, "mem_mib"), [])]
        entry = per_gpu.setdefault(index, {"index": index, "util": [], "peak_mem_mib": 0.0, "idle_seconds": 0.0})
        entry["util"] += [v for _, v in points]
        entry["peak_mem_mib"] = max([entry["peak_mem_mib"], *mem])
        entry["idle_seconds"] += idle
    every = [v for entry in per_gpu.values() for v in entry["util"]]
    return {
        "samples": len(every),
        "mean_util_percent": round(statistics.fmean(every), 1),
        "peak_util_percent": round(max(every), 1),
        "peak_memory_mib": round(max(e["peak_mem_mib"] for e in per_gpu.values()), 1),
        "idle_gpu_hours": round(idle_seconds / 3600, 4),
        "gpus": [{"index": e["index"], "mean_util_percent": round(statistics.fmean(e["util"]), 1),
                  "peak_util_percent": round(max(e["util"]), 1), "peak_memory_mib": round(e["peak_mem_mib"], 1),
                  "idle_gpu_hours": round(e["idle_seconds"] / 3600, 4)} for _, e in sorted(per_gpu.items())],
    }


def for_status(store, job_id: str, attempt) -> dict[str, Any]:
    """What ``runjob status`` shows of an attempt's GPUs: the ones a local backend gave it
    (its ``gpus`` event) and the newest telemetry of each."""
    return for_statuses(store, {job_id: [attempt]})[(job_id, attempt.n)]


def for_statuses(store, attempts: dict[str, list]) -> dict[tuple[str, int], dict[str, Any]]:
    """:func:`for_status` of every attempt of *attempts* (job id -> its attempts), in two queries
    per 500 jobs whatever their number (a shared state answers each query over the network)."""
    given = store.events_of(list(attempts), kinds=("gpus",))
    shown = [job_id for job_id, rows in attempts.items() if any(a.state in _SHOWN for a in rows)]
    points = store.metrics_of(shown, series=_GPU_SERIES) if shown else {}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for job_id, rows in attempts.items():
        for attempt in rows:
            info: dict[str, Any] = {}
            mine = [e for e in given.get(job_id, []) if e.attempt == attempt.n]
            if mine:
                info["gpus"] = mine[-1].data.get("gpus")
            if attempt.state in _SHOWN:
                now = _latest(points.get(job_id, []), attempt.n)
                if now:
                    info["gpu_telemetry"] = now
            out[(job_id, attempt.n)] = info
    return out


def status_line(info: dict[str, Any]) -> str:
    """"GPU 0: 87% 41.2 GiB" for the status table."""
    parts = []
    for gpu in (info.get("gpu_telemetry") or {}).get("gpus", []):
        util = "-" if gpu["util"] is None else f"{gpu['util']:.0f}%"
        mem = "-" if gpu["mem_mib"] is None else f"{gpu['mem_mib'] / 1024:.1f} GiB"
        parts.append(f"{gpu['index']}: {util} {mem}")
    if parts:
        return "; ".join(parts)
    return f"given {info['gpus']}" if info.get("gpus") else "-"
