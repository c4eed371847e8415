"""Keep tokens out of scripts, logs, the state database and error text."""

from __future__ import annotations

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


def _secret_values() -> list[str]:
    values = []
    for name, value in os.environ.items():
        if (name in SECRET_ENV_VARS or _SECRET_NAME.search(name.upper())) and value and len(value) >= 6:
            values.append(value)
    # Longest first: a secret that contains another is replaced whole.
    return sorted(set(values), key=len, reverse=True)


def redact(text: str) -> str:
    """Replace known secret values and token-shaped strings with ``***``."""
    if not text:
        return text
    for value in _secret_values():
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
