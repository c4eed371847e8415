"""Learning from runs: what a job really used, next to what pre-flight estimated.

After a job ran, the backend builds one ``memory`` artifact: the SLURM plugin's collect with
:func:`memory_artifact` (from the job log and sacct), local and RunPod jobs with
:func:`peak_artifact` (from the GPU peak their telemetry read). It holds the GPU peak (a
``torch.cuda.max_memory_allocated``/``max_memory_reserved`` print, or ``nvidia-smi`` memory
lines), the host peak SLURM accounted (``sacct`` MaxRSS), and the estimate of the same
spec. The artifact is stored like every other (the report lists it); its ``key`` names the
model and settings, so ``runjob estimate`` and pre-flight can say "measured on this
cluster" when an earlier run with the same key exists (:func:`lookup`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

GIB = 1 << 30
_UNITS = {"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kb": 1e3, "kib": 1 << 10, "m": 1 << 20, "mb": 1e6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1e9, "gib": 1 << 30, "t": 1 << 40}
# "torch.cuda.max_memory_allocated() = 35.2 GiB", "max_memory_reserved: 36091 MiB", "...allocated 3.1e10"
_TORCH_PEAK = re.compile(
    r"max_memory_(allocated|reserved)\W{0,12}?\s*([0-9]+(?:\.[0-9]+)?(?:e[0-9]+)?)\s*(GiB|GB|MiB|MB|bytes|B)?\b",
    re.IGNORECASE,
)
# nvidia-smi's table row "|  35210MiB / 81559MiB |" and --query-gpu=memory.used CSV "35210 MiB"
_SMI_TABLE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_SMI_CSV = re.compile(r"^\s*(\d+)\s*MiB\s*(?:,|$)", re.MULTILINE)


def gpu_peak_from_log(text: str) -> tuple[int, str] | None:
    """(peak bytes, where it came from) from a job's log, or None when it reports nothing.

    A torch report wins over nvidia-smi (it is the process's own peak; nvidia-smi samples
    the whole card). Several reports: the largest (a job prints one per rank or per stage).
    A number without a unit is bytes; "GB" in these prints is nearly always bytes/2**30
    (``bytes_to_giga_bytes``), but it is taken as written.
    """
    torch_peaks = []
    for match in _TORCH_PEAK.finditer(text or ""):
        unit = (match.group(3) or "").lower()
        torch_peaks.append(int(float(match.group(2)) * _UNITS[unit]))
    if torch_peaks:
        return max(torch_peaks), "torch.cuda.max_memory_" + _TORCH_PEAK.search(text).group(1).lower()
    smi = [int(m.group(1)) for m in _SMI_TABLE.finditer(text or "")]
    smi += [int(m.group(1)) for m in _SMI_CSV.finditer(text or "")]
    if smi:
        return max(smi) << 20, "nvidia-smi"
    return None


def maxrss_bytes(text: str | None) -> int | None:
    """sacct's MaxRSS ("123456K", "1.50G", "512M", "" when the step was not accounted)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)\s*", text or "")
    if not match:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).lower() or "k"])


#: Settings added after measured runs were first recorded, with the value every earlier run
#: had: left out of the key at that value, so those runs keep matching their estimates.
_LATER_SETTINGS = {"optimizer_in_bwd": False, "loss": "standard", "nf4_backend": "bnb", "hf_prompt_logits": "last",
                   "torch_compile": False, "vllm_version": None, "fsdp_root": "sharded"}


def key_of(est) -> str:
    """The model and every setting of an estimate, hashed: equal keys, same job shape."""
    settings = {k: v for k, v in sorted(est.settings.items())
                if k != "suggest" and not (k in _LATER_SETTINGS and v == _LATER_SETTINGS[k])}
    blob = json.dumps({"model": est.model, "kind": est.kind, "engine": est.engine, "gpu": est.gpu,
                       "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def memory_artifact(job, cluster, log_text: str, maxrss_text: str | None, source: str):
    """The ``memory`` artifact of a finished job, or None when nothing was measured.

    For backends whose job log carries the peak (the SLURM plugin: torch or nvidia-smi
    prints) and whose scheduler accounts host memory (``sacct`` MaxRSS)."""
    gpu = gpu_peak_from_log(log_text)
    rss = maxrss_bytes(maxrss_text)
    return peak_artifact(job, cluster, gpu[0] if gpu else None, gpu[1] if gpu else "", source, host_rss_bytes=rss)


def log_file_artifact(job, cluster, path, source: str):
    """:func:`memory_artifact` from a job log on this machine (a local job's log, a RunPod
    pod's log once copied off the pod), or None when it is missing or reports no peak.

    The file is streamed and only the lines that can carry a peak are kept (a torch
    ``max_memory_*`` print or an nvidia-smi ``MiB`` line), so a long log costs no memory."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace") as log:
        lines = [line for line in log if "max_memory_" in line or "MiB" in line]
    return memory_artifact(job, cluster, "".join(lines), None, source) if lines else None


def peak_artifact(job, cluster, gpu_peak_bytes: int | None, gpu_peak_from: str, source: str, *,
                  host_rss_bytes: int | None = None):
    """The ``memory`` artifact from a GPU peak a backend read itself, or None without a peak.

    For local and RunPod jobs: the GPU telemetry of the job (nvidia-smi ``memory.used``
    samples, the largest per GPU) or a torch print gives ``gpu_peak_bytes``; ``gpu_peak_from``
    says which. The artifact carries the estimate of the same spec under the same key as the
    SLURM one, so a later ``runjob estimate`` / pre-flight of that model and settings says
    what was measured (:func:`lookup`), whichever backend ran it.
    """
    from runjob_core.errors import RunjobError
    from runjob_core.estimator import estimate, jobspec
    from runjob_core.models import Artifact

    if gpu_peak_bytes is None and host_rss_bytes is None:
        return None
    data: dict[str, Any] = {}
    parts = []
    if gpu_peak_bytes is not None:
        data.update(gpu_peak_gib=round(gpu_peak_bytes / GIB, 3), gpu_peak_from=gpu_peak_from)
        parts.append(f"GPU peak {gpu_peak_bytes / GIB:.1f} GiB ({gpu_peak_from})")
    try:
        args = jobspec.estimate_args(job, cluster)
        est = estimate(args[0], args[1], args[2], suggest=False, **args[3]) if args else None
    except RunjobError:
        est = None
    if est is not None:
        data.update(key=key_of(est), model=est.model, kind=est.kind, engine=est.engine, gpu=est.gpu,
                    estimate_total_gib=round(est.total_gib, 3), estimate_torch_peak_gib=round(est.torch_peak_gib, 3))
        parts.append(f"estimate {est.total_gib:.1f} GiB per GPU (torch peak {est.torch_peak_gib:.1f})")
    if host_rss_bytes is not None:
        data["max_rss_gib"] = round(host_rss_bytes / GIB, 3)
        parts.append(f"host MaxRSS {host_rss_bytes / GIB:.1f} GiB")
    return Artifact(name="memory", kind="memory", location="; ".join(parts), source=source, data=data)


def lookup(store, est, *, limit: int = 500) -> dict[str, Any] | None:
    """The newest measured run with the same model and settings as *est*, or None."""
    key = key_of(est)
    runs = []
    for row in store.list_jobs(limit=limit):
        for art in store.artifacts(row.id):
            if art.kind == "memory" and art.data.get("key") == key and "gpu_peak_gib" in art.data:
                runs.append((art.created_at, row, art))
    if not runs:
        return None
    created, row, art = max(runs, key=lambda r: r[0])
    return {"job": row.id, "name": row.name, "runs": len(runs), "gpu_peak_gib": art.data["gpu_peak_gib"],
            "gpu_peak_from": art.data.get("gpu_peak_from"), "max_rss_gib": art.data.get("max_rss_gib"),
            "estimate_total_gib": art.data.get("estimate_total_gib"), "measured_at": created}


def describe(seen: dict[str, Any]) -> str:
    runs = f", {seen['runs']} runs" if seen["runs"] > 1 else ""
    return (f"measured on this cluster: {seen['gpu_peak_gib']:.1f} GiB GPU peak ({seen['gpu_peak_from']}) "
            f"by job {seen['job']} ({seen['name']}{runs})")
