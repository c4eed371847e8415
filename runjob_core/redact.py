"""Keep tokens out of scripts, logs, the state database and error text."""

from __future__ import annotations

import functools
import os
import re

#: Environment variables whose values are secrets wherever they appear.
SECRET_ENV_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "RUNPOD_API_KEY", "WANDB_API_KEY", "OPENAI_API_KEY")
#: Any other variable named like this holds a secret too (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, ...).
_SECRET_NAME = re.compile(r"(TOKEN|API_KEY|SECRET|SECRET_ACCESS_KEY|PASSWORD|PASSWD)$")
#: Token shapes: Hugging Face, RunPod, OpenAI-style, GitHub, Slack, AWS access key ids.
_TOKEN_PATTERNS = re.compile(
    r"\b(hf_[A-Za-z0-9]{20,}|rpa_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{40,}|xox[abpr]-[A-Za-z0-9-]{20,}|AKIA[0-9A-Z]{16})\b"
)


def _secret_values() -> tuple[str, ...]:
    """The secret values in the environment now, longest first. Called for every event and
    error text (2,000 times in a 1,000-element sweep submit): reading every variable's value
    each time cost 0.25 ms a call, so the secret *names* are worked out once per set of
    variable names and only their values are read on each call."""
    # CPython keeps the environment as a dict of bytes: the set of its keys costs no decoding
    # (iterating os.environ decodes every name: half of this function's time).
    raw = getattr(os.environ, "_data", None)
    names = _secret_names(frozenset(raw) if isinstance(raw, dict) else frozenset(os.environ))
    return _longest_first(tuple(os.environ.get(name) or "" for name in names))


@functools.lru_cache(maxsize=8)
def _secret_names(names: frozenset) -> tuple[str, ...]:
    decoded = (os.fsdecode(n) if isinstance(n, bytes) else n for n in names)
    return tuple(sorted(n for n in decoded if n in SECRET_ENV_VARS or _SECRET_NAME.search(n.upper())))


@functools.lru_cache(maxsize=8)
def _longest_first(values: tuple[str, ...]) -> tuple[str, ...]:
    # Longest first: a secret that contains another is replaced whole.
    return tuple(sorted({v for v in values if len(v) >= 6}, key=len, reverse=True))


def redact(text: str) -> str:
    """Replace known secret values and token-shaped strings with ``***``."""
    return _redact(text, _secret_values())


def redactor():
    """:func:`redact` with the environment's secret values read once, for many texts written
    together (a 1,000-element sweep's 2,000 events: reading them was ~3 us a text)."""
    return functools.partial(_redact, values=_secret_values())


def _redact(text: str, values: tuple[str, ...]) -> str:
    if not text:
        return text
    for value in values:
        text = text.replace(value, "***")
    return _TOKEN_PATTERNS.sub("***", text)


def find_token(text: str) -> str | None:
    """The first token-shaped value in *text*, if any."""
    match = _TOKEN_PATTERNS.search(text)
    return match.group(0) if match else None


def log_filter() -> tuple[str, str]:
    """(python, file) of the filter that copies its stdin to stdout with :func:`redact`
    applied, run as ``python -S -I FILE``: a detached job's output on its way into the log
    (``transport.detached.wrapper_argv(..., redact_with=log_filter())``)."""
    import sys
    from pathlib import Path

    return sys.executable, str(Path(__file__).with_name("_log_redactor.py"))
