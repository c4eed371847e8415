"""The ``time`` object of ``runjob estimate``: the command line's work and limit, into the time model."""

from __future__ import annotations

from typing import Any

import click


def time_for(est, model: str, *, kind: str, steps: int | None, grad_accum: int, train_tokens: int | None,
             framework: str, fp8: bool, rows: int | None, input_tokens: int, output_tokens: int,
             time_limit: str | None, measured: dict[str, Any] | None,
             transformers_version: str | None = None, calibrated: dict[str, Any] | None = None) -> dict[str, Any]:
    from runjob_core.config import parse_duration
    from runjob_core.estimator.time_preflight import time_object

    limit = None
    if time_limit:
        try:
            limit = float(parse_duration(time_limit))
        except ValueError as exc:
            raise click.BadParameter(f"{time_limit!r} is not a time (use D-HH:MM:SS, HH:MM:SS or 2h)",
                                     param_hint="--time-limit") from exc
    seq, micro = int(est.settings.get("seq_len") or 2048), int(est.settings.get("batch") or 1)
    if kind == "inference":
        work: dict[str, Any] = {"input_tokens": float(input_tokens), "output_tokens": float(output_tokens),
                                "counted": f"{input_tokens} in + {output_tokens} out tokens per row"}
        if rows:
            work.update(rows=rows, tokens=rows * output_tokens, counted=f"{rows:,} rows x {output_tokens} generated tokens")
    else:
        global_batch = micro * grad_accum * est.num_gpus
        work = {"global_batch": global_batch, "counted": "no --steps or --train-tokens: rate only"}
        if steps:
            work.update(tokens=steps * global_batch * seq, counted=f"{steps:,} steps x global batch {global_batch} x {seq:,} tokens")
        elif train_tokens:
            work.update(tokens=train_tokens, counted=f"{train_tokens:,} training tokens")
    return time_object(est, model, work=work, limit_seconds=limit, framework=framework,
                       precision="fp8" if fp8 else "bf16", grad_accum=grad_accum, measured=measured,
                       transformers_version=transformers_version, calibrated=calibrated)
