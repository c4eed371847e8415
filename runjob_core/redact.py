"""Keep tokens out of scripts, logs, the state database and error text."""

from __future__ import annotations

import os
import re

#: Environment variables whose values are secrets wherever they appear.
SECRET_ENV_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "RUNPOD_API_KEY", "WANDB_API_KEY", "OPENAI_API_KEY")
_TOKEN_PATTERNS = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|rpa_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})\b")


def redact(text: str) -> str:
    """Replace known secret values and token-shaped strings with ``***``."""
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name)
        if value and len(value) >= 6:
            text = text.replace(value, "***")
    return _TOKEN_PATTERNS.sub("***", text)
