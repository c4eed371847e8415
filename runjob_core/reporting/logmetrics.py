"""Metrics picked out of common trainer log lines, for jobs that never call runjob's
``progress()``: the dashboard still gets loss and reward curves.

Recognised (one metric dict per line; anything else is ignored):

- HF Trainer and TRL: ``{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}``
  (also JSON with double quotes, and transformers 5's numbers printed as strings:
  ``{'loss': '0.6931'}``). These carry no step: the caller numbers them in order.
  Trainer's end-of-run summary (``train_runtime``, ``train_loss``, ...) is not a curve.
- verl's console logger: ``step:12 - actor/pg_loss:0.123 - critic/score/mean:0.5 - ...``
- tqdm postfixes, as OpenRLHF prints them:
  ``Train step of epoch 0:  10%|#  | 10/100 [00:10<01:30, 1.00it/s, gpt_loss=1.23, lr=5e-06]``
  (the step is the ``10`` of ``10/100``).
"""

from __future__ import annotations

import ast
import math
import re

#: A dict is taken as metrics only if one of its keys contains one of these words
#: (a printed config dict is not a metrics line).
_METRIC_WORDS = ("loss", "reward", "acc", "score", "kl", "entropy", "grad_norm", "learning_rate", "perplexity")
_STEP_KEYS = ("step", "global_step", "train/global_step")
_DROP = {"epoch", "total_flos", "step", "global_step", "train/global_step", "train_runtime", "train_samples_per_second",
         "train_steps_per_second", "train_loss"}

_DICT = re.compile(r"""\{\s*['"][^{}\n]*\}""")
_VERL = re.compile(r"\bstep:(\d+)\s+-\s+(\S+:\s*[-+0-9.eEnaif]+(?:\s+-\s+\S+:\s*[-+0-9.eEnaif]+)*)")
_TQDM = re.compile(r"\b(\d+)/\d+\s+\[[^\]\n]*?,\s*([A-Za-z_][\w/.]*=[^,\]\n]+(?:,\s*[A-Za-z_][\w/.]*=[^,\]\n]+)*)\]")


def _float(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def parse(text: str) -> list[tuple[int | None, dict[str, float]]]:
    """(step or None, {series: value}) for each metrics line of *text*, in order."""
    out: list[tuple[int | None, dict[str, float]]] = []
    if "{" in text:
        for match in _DICT.finditer(text):
            found = _from_dict(match.group(0))
            if found is not None:
                out.append((match.start(), *found))
    if "step:" in text:
        for match in _VERL.finditer(text):
            values = {}
            for part in match.group(2).split(" - "):
                name, _, raw = part.strip().rpartition(":")
                number = _float(raw)
                if name and number is not None:
                    values[name] = number
            if values:
                out.append((match.start(), int(match.group(1)), values))
    if "=" in text and "/" in text:
        for match in _TQDM.finditer(text):
            values = {}
            for part in match.group(2).split(","):
                name, _, raw = part.strip().partition("=")
                number = _float(raw)
                if number is not None:
                    values[name] = number
            if values:
                out.append((match.start(), int(match.group(1)), values))
    out.sort(key=lambda item: item[0])
    return [(step, values) for _position, step, values in out]


def _from_dict(text: str) -> tuple[int | None, dict[str, float]] | None:
    try:
        value = ast.literal_eval(text.replace("true", "True").replace("false", "False").replace("null", "None"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict) or not any(isinstance(k, str) and any(w in k for w in _METRIC_WORDS) for k in value):
        return None
    step = next((int(value[k]) for k in _STEP_KEYS if isinstance(value.get(k), (int, float))
                 and not isinstance(value.get(k), bool)), None)
    # transformers 5 prints its numbers as strings ({'loss': '1.128'}): those count too.
    numbers = {k: f for k, v in value.items() if isinstance(k, str) and k not in _DROP and (f := _float(v)) is not None}
    return (step, numbers) if numbers else None
