"""From a job spec to the ``time`` object of pre-flight: rate, amount of work, segments, cost.

``params`` keys read (all optional; the memory keys of :mod:`runjob_core.estimator.jobspec`
too: seq_len, micro_batch_size, gradient_checkpointing, zero_stage, tensor_parallel_size,
concurrency / batch_size, max_num_seqs):

==============================  ========================================================
steps / max_steps               optimizer steps (training work = steps x global batch x seq_len)
gradient_accumulation_steps     micro-batches per step (default 1)
train_tokens                    training tokens, when steps are not given
rows / num_samples / samples    dataset rows (training: x epochs x seq_len; inference: prompts)
epochs / num_train_epochs       passes over the rows (default 1)
input_tokens / prompt_tokens    mean prompt length of an inference row
output_tokens                   mean generated length (default: model.max_tokens, an upper bound);
                                with model.max_tokens above it, rows may run to that cap: the
                                longest row sets how long a static batch (and a job's tail) runs
framework                       hf (default) | trl | axolotl | deepspeed | fsdp | torchtitan | megatron | nemo
precision                       bf16 (default) | fp8 (training)
compile                         true: torch.compile of the model (training; x1.19 the achieved fraction)
nf4_backend                     bnb (default) | torchao: whose NF4 QLoRA (torchao's dequantisation is
                                counted in HBM bytes, bitsandbytes' as x0.6)
==============================  ========================================================

Without rows, ``data.input`` is counted when it is a local ``.jsonl`` file. When the work is
unknown, the object carries the rate alone (``total_seconds`` and ``segments`` are None).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from runjob_core.errors import RunjobError

ROW_KEYS = ("rows", "num_samples", "samples", "n_samples_total")


def positive(job, *keys: str, number=int) -> Any:
    """The first of *keys* set in ``params``, checked: a bad value raises naming its key path."""
    for key in keys:
        value = job.params.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or (number is int and value != int(value)):
            raise RunjobError(f"invalid {value!r} at $.params.{key} in {job.source}: use a number > 0")
        return number(value)
    return None


def _rows(job) -> tuple[int | None, str]:
    rows = positive(job, *ROW_KEYS)
    if rows is not None:
        return rows, "params"
    if job.data.input and job.data.input.endswith(".jsonl"):
        path = Path(job.base_dir) / job.data.input
        if path.is_file():
            with open(path, "rb") as handle:
                return sum(1 for line in handle if line.strip()), str(job.data.input)
    return None, ""


def work_of(job, kind: str, gpus: int, tp: int) -> dict[str, Any]:
    """The amount of work the spec states, and how it was read."""
    if kind != "inference":
        seq = positive(job, "seq_len") or 2048
        micro = positive(job, "micro_batch_size", "batch_size") or 1
        accum = positive(job, "gradient_accumulation_steps", "grad_accum") or 1
        global_batch = micro * accum * max(1, gpus // tp)
        steps = positive(job, "steps", "max_steps")
        if steps is not None:
            return {"tokens": steps * global_batch * seq, "steps": steps, "global_batch": global_batch,
                    "counted": f"{steps:,} steps x global batch {global_batch} x {seq:,} tokens"}
        tokens = positive(job, "train_tokens")
        if tokens is not None:
            return {"tokens": tokens, "steps": math.ceil(tokens / (global_batch * seq)), "global_batch": global_batch,
                    "counted": f"params.train_tokens {tokens:,}"}
        rows, where = _rows(job)
        if rows is not None:
            epochs = positive(job, "epochs", "num_train_epochs", number=float) or 1.0
            tokens = int(rows * epochs * seq)
            return {"tokens": tokens, "steps": math.ceil(tokens / (global_batch * seq)), "global_batch": global_batch,
                    "counted": f"{rows:,} rows ({where}) x {epochs:g} epochs x {seq:,} tokens (packed/padded)"}
        return {"global_batch": global_batch, "counted": "no steps, train_tokens or rows: rate only"}
    input_tokens = positive(job, "input_tokens", "prompt_tokens", number=float)
    input_from = "" if input_tokens else " (512 prompt tokens assumed: set params.input_tokens)"
    input_tokens = input_tokens or 512.0
    output = positive(job, "output_tokens", number=float)
    output_from = "params.output_tokens"
    if output is None:
        output = float(job.model.max_tokens or 512)
        output_from = "model.max_tokens (an upper bound)" if job.model.max_tokens else "512 assumed"
    rows, where = _rows(job)
    out = {"input_tokens": input_tokens, "output_tokens": output}
    if job.model.max_tokens and job.model.max_tokens > output:
        out["longest_output_tokens"] = float(job.model.max_tokens)
        output_from += f", the longest up to model.max_tokens {job.model.max_tokens:g}"
    if rows is None:
        return {**out, "counted": f"{input_tokens:g} in + {output:g} out tokens per row ({output_from}){input_from}; "
                                  "no row count: rate only"}
    return {**out, "rows": rows, "tokens": rows * output,
            "counted": f"{rows:,} rows ({where}) x {output:g} generated tokens ({output_from}) after {input_tokens:g} "
                       f"prompt tokens{input_from}"}


def hms(seconds: float) -> str:
    s = int(math.ceil(seconds))
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{h}:{m:02d}:{s:02d}"


def about(seconds: float) -> str:
    """'about 13 h', 'about 25 min', 'about 40 s'."""
    if seconds >= 5400:
        return f"about {seconds / 3600:.0f} h" if seconds >= 36000 else f"about {seconds / 3600:.1f} h"
    if seconds >= 90:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds:.0f} s"


def _span(low: float, center: float, high: float) -> str:
    """'10-29 h', '35-102 min', '20-60 s': the range in the unit :func:`about` gives *center*."""
    if center >= 5400:
        return f"{low / 3600:.0f}-{high / 3600:.0f} h" if center >= 36000 else f"{low / 3600:.1f}-{high / 3600:.1f} h"
    if center >= 90:
        return f"{low / 60:.0f}-{high / 60:.0f} min"
    return f"{low:.0f}-{high:.0f} s"


def line(time: dict[str, Any], *, work_hint: str = "set params.steps, train_tokens or rows") -> str:
    """The one line the tables show."""
    per = " per GPU" if time["kind"] != "inference" else ""
    how = time["bound"] + "-bound"
    if time["source"] == "measured":
        how += ", measured on this cluster"
    elif time["source"] == "calibrated":
        how += f", calibrated on this cluster x{time['calibration']:.2f}"
    elif time.get("efficiency") is not None:
        how += f", MFU {time['efficiency']:.2f} assumed"
    rate = f"~{time['tokens_per_s']:,.0f} tokens/s{per} ({how})"
    if time.get("total_seconds") is None:
        return f"{rate}; the amount of work is unknown ({work_hint})"
    text = about(time["total_seconds"])
    if time.get("range_seconds"):
        low, high = time["range_seconds"]
        text += f" ({_span(low, time['total_seconds'], high)})"
    text += f" at {rate}"
    if time.get("limit_seconds"):
        n, most = time["segments"], time.get("segments_max") or time["segments"]
        text += (f": {n} segments of the {hms(time['limit_seconds'])} limit" if n > 1
                 else f": fits the {hms(time['limit_seconds'])} limit")
        if most > n:
            text += f" (up to {most} segments at the high end)"
    if time.get("gpu_hours") is not None:
        text += f"; {time['gpu_hours']:,.1f} GPU-hours"
        if time.get("usd") is not None:
            text += f" (${time['usd']:,.2f} on RunPod)"
    if time.get("suggested_seconds") and not time.get("limit_seconds"):
        text += f"; ask for resources.time {hms(time['suggested_seconds'])} (the range's high end + 10%)"
    return text
