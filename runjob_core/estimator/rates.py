"""Learning from runs: the rate a job really achieved, recorded at collect, used by later estimates.

At collect (every backend: :mod:`runjob_core.defaults.throughput` implements ``runjob_collect``) the
job's log is read for the rate it printed, in this order:

* the HF Trainer's summary ``'train_samples_per_second': 12.3`` (training; samples x seq_len);
* vLLM's progress bar ``est. speed input: 1234.5 toks/s, output: 567.8 toks/s`` and its
  server log ``Avg generation throughput: 13.6 tokens/s`` (inference; generated tokens);
* a ``tokens/s`` print (``tokens_per_s=123``, ``123.4 tokens/s``);
* the last tqdm bar ``[00:10<01:20,  1.19it/s]`` / ``2.50s/it`` (training: optimizer steps);
* else the progress file: rows written per second of the attempt x the output length.

The rate is stored as a ``throughput`` artifact keyed like the measured-memory record
(:func:`runjob_core.estimator.measured.key_of`: the model and every setting), in the units
of the time model: training tokens per second per GPU, inference generated tokens per second
of the whole job. :func:`lookup` finds the newest one for an estimate's key.

Each record also keeps the first-principles rate the time model gave the same job
(``first_principles_tokens_per_s``). A later job with other settings, or another model, on the
same GPU type with the same engine (inference) or framework and kind (training) has no record
of its own, but the user's finished jobs say how far the model is off *on this cluster* (its host
CPUs, its network, its library versions): :func:`calibration` is the median of measured /
first-principles over those records, and the estimate is scaled by it ("calibrated").
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_HF_SAMPLES = re.compile(r"['\"]?train_samples_per_second['\"]?\s*[:=]\s*" + _NUMBER)
_VLLM_BAR = re.compile(r"est\. speed input:\s*" + _NUMBER + r"\s*toks/s,\s*output:\s*" + _NUMBER + r"\s*toks/s")
_VLLM_SERVER = re.compile(r"Avg generation throughput:\s*" + _NUMBER + r"\s*tokens/s")
_TOKENS_PRINT = re.compile(r"(?:tokens?_per_s(?:ec(?:ond)?)?\s*[:=]\s*" + _NUMBER + r"|" + _NUMBER + r"\s*(?:tokens|toks)/s\b)",
                           re.IGNORECASE)
_TQDM_RATE = re.compile(r"<[0-9:]+,\s*" + _NUMBER + r"\s*(it/s|s/it)\]")


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    found = None
    for found in pattern.finditer(text):
        pass
    return found


def rate_from_log(text: str, *, kind: str, seq_len: int, global_batch: int, gpus: int) -> tuple[float, str] | None:
    """(tokens per second in the time model's units, what it was read from), or None."""
    text = (text or "").replace("\r", "\n")
    gpus = max(1, gpus)
    if kind != "inference":
        match = _last(_HF_SAMPLES, text)
        if match:
            return float(match.group(1)) * seq_len / gpus, "train_samples_per_second"
    else:
        match = _last(_VLLM_BAR, text)
        if match:
            return float(match.group(2)), "vLLM est. speed output"
        values = [float(m.group(1)) for m in _VLLM_SERVER.finditer(text)]
        values = [v for v in values if v > 0]
        if values:  # the server prints every 5 s, idle ones included: the busy median
            values.sort()
            return values[len(values) // 2], "vLLM Avg generation throughput"
    match = _last(_TOKENS_PRINT, text)
    if match:
        value = float(match.group(1) or match.group(2))
        return (value / gpus if kind != "inference" else value), "tokens/s print"
    if kind != "inference":
        match = _last(_TQDM_RATE, text)
        if match:
            steps = float(match.group(1)) if match.group(2) == "it/s" else 1.0 / float(match.group(1))
            return steps * global_batch * seq_len / gpus, "progress bar it/s"
    return None


def throughput_artifact(job, cluster, submission, log_text: str, rows_per_s: float | None, source: str):
    """The ``throughput`` artifact of a collected job, or None when it reported no rate."""
    from runjob_core.errors import RunjobError
    from runjob_core.estimator import estimate, jobspec, measured, time_job
    from runjob_core.models import Artifact

    try:
        args = jobspec.estimate_args(job, cluster)
        if args is None:
            return None
        est = estimate(args[0], args[1], args[2], suggest=False, **args[3])
        work = time_job.work_of(job, est.kind, est.num_gpus, est.tp if est.kind == "inference" else 1)
    except RunjobError:
        return None
    seq = int(est.settings.get("seq_len") or 2048)
    found = rate_from_log(log_text, kind=est.kind, seq_len=seq, global_batch=int(work.get("global_batch") or 1),
                          gpus=est.num_gpus)
    if found is None and rows_per_s and est.kind == "inference":
        found = rows_per_s * float(work["output_tokens"]), "progress file rows/s x output tokens"
    if found is None or found[0] <= 0:
        return None
    rate, where = found
    per = " per GPU" if est.kind != "inference" else ""
    data: dict[str, Any] = {"key": measured.key_of(est), "model": est.model, "kind": est.kind, "engine": est.engine,
                            "gpu": est.gpu, "num_gpus": est.num_gpus, "tokens_per_s": round(rate, 2), "from": where,
                            "attempt": submission.attempt, "framework": job.params.get("framework") or "hf",
                            "first_principles_tokens_per_s": _first_principles(job, cluster)}
    return Artifact(name="throughput", kind="throughput", location=f"{rate:,.0f} tokens/s{per} ({where})",
                    source=source, data=data)


def _first_principles(job, cluster) -> float | None:
    """The time model's rate for *job* (what a calibration compares the measured rate with)."""
    from runjob_core.errors import RunjobError
    from runjob_core.estimator.time_preflight import time_for_job

    try:
        time = time_for_job(job, cluster, None)
    except RunjobError:
        return None
    return time["first_principles_tokens_per_s"] if time else None


#: A calibration factor outside this band says more about one broken run than about the cluster.
CALIBRATION_BAND = (0.25, 4.0)


def records(store, *, limit: int = 500) -> list[tuple[Any, Any]]:
    """(job row, artifact) of every ``throughput`` record of the newest *limit* jobs: read once for
    :func:`lookup` and :func:`calibration` together."""
    return [(row, art) for row in store.list_jobs(limit=limit) for art in store.artifacts(row.id)
            if art.kind == "throughput"]


def calibration(store, est, framework: str, *, found: list | None = None) -> dict[str, Any] | None:
    """The median measured / first-principles ratio of the user's finished jobs like *est* (same GPU
    type, same kind, same engine for inference or framework for training), or None."""
    import statistics

    ratios, names = [], []
    for row, art in (records(store) if found is None else found):
        d = art.data
        if d.get("gpu") != est.gpu or d.get("kind") != est.kind:
            continue
        if est.kind == "inference" and d.get("engine") != est.engine:
            continue
        if est.kind != "inference" and (d.get("framework") or "hf") != framework:
            continue
        fp, got = d.get("first_principles_tokens_per_s"), d.get("tokens_per_s")
        if isinstance(fp, (int, float)) and fp > 0 and isinstance(got, (int, float)) and got > 0:
            ratios.append(got / fp)
            names.append(row.name)
    if not ratios:
        return None
    low, high = CALIBRATION_BAND
    factor = min(high, max(low, statistics.median(ratios)))
    what = est.engine if est.kind == "inference" else f"{framework} {est.kind}"
    return {"factor": factor, "runs": len(ratios), "names": sorted(set(names))[:3], "what": what, "gpu": est.gpu}


def lookup(store, est, *, found: list | None = None) -> dict[str, Any] | None:
    """The newest recorded rate with the same model and settings as *est*, or None."""
    from runjob_core.estimator.measured import key_of

    key = key_of(est)
    runs = [(art.created_at, row, art) for row, art in (records(store) if found is None else found)
            if art.data.get("key") == key and art.data.get("tokens_per_s")]
    if not runs:
        return None
    _created, row, art = max(runs, key=lambda r: r[0])
    return {"job": row.id, "name": row.name, "runs": len(runs), "tokens_per_s": float(art.data["tokens_per_s"]),
            "from": art.data.get("from")}
