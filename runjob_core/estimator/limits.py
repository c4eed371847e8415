"""The longest training sequence that fits: what a user asks before "does 8k fit?".

Training memory grows with the sequence length through the activations and the loss's
logits (linearly with flash/SDPA attention, quadratically with eager attention), so the
answer is found by bisection over the same estimate the verdict uses: it can never disagree
with ``fits`` at the returned length.
"""

from __future__ import annotations

from typing import Any

from runjob_core.estimator.gpus import GPUSpec
from runjob_core.estimator.training import training

#: The search stops here (4M tokens): beyond any context a model is trained on today.
LONGEST_SEARCHED = 1 << 22


def max_seq_len_that_fits(ctx: Any, kind: str, g: GPUSpec, kw: dict[str, Any]) -> int:
    """Largest ``seq_len`` (at the job's micro-batch) whose training estimate fits, 0 if none."""
    def fits(seq_len: int) -> bool:
        trial = dict(kw, seq_len=seq_len, suggest=False)
        return training(ctx, kind, g, **trial).fits

    if not fits(1):
        return 0
    low, high = 1, LONGEST_SEARCHED
    if fits(high):
        return high
    while high - low > 1:  # invariant: fits(low) and not fits(high)
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low
