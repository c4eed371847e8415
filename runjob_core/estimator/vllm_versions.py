"""What changes in vLLM's memory accounting with its version (``vllm_version``).

vLLM sizes its KV cache as ``total_gpu_memory * gpu_memory_utilization`` minus what the
profile run used, but *what it counts* as used changed twice:

* **vLLM 0.2 - 0.6.3** (V0 worker, vllm/worker/worker.py ``profile_num_available_blocks``,
  later ``determine_num_available_blocks``): after ``torch.cuda.empty_cache()`` and the
  profile run, ``free, total = torch.cuda.mem_get_info(); peak_memory = total - free``. That
  is the whole device's used memory: the CUDA context, cuBLAS handles, NCCL buffers, the
  weights and the profile run's blocks (still reserved by the caching allocator) are all
  *inside* the budget, and nothing else has to fit beside it except the CUDA graphs captured
  afterwards (``warm_up_model``). 0.6.x split the figure into torch's allocated peak plus
  ``non_torch_allocations = (total - free) - torch allocated``; the context still counts.
  This is why ``gpu_memory_utilization`` 0.98 or 1.0 ran on those versions.
* **vLLM 0.6.4 and later** (PR #10511 "overhaul memory profiling", then V1's
  ``determine_available_memory``): the baseline is taken when the worker starts, after the
  CUDA context exists, so the context sits *outside* the budget, in the
  ``1 - gpu_memory_utilization`` slack (what :func:`runjob_core.estimator.vllm_memory.vllm_inference`
  models by default).

The profile run's size changed too: V0 without chunked prefill profiles
``max_num_batched_tokens = max(max_model_len, 2048)`` tokens (vllm/config.py
``SchedulerConfig``), split into ``max_num_seqs`` sequences; V1 (the default engine from 0.8)
profiles its chunked-prefill budget (:func:`runjob_core.estimator.memory.default_batched_tokens`).
V0 with chunked prefill on (the server's default above 32k context from 0.5) profiles its
own, smaller ``max_num_batched_tokens``: pass it explicitly.
"""

from __future__ import annotations

import re

from runjob_core.errors import RunjobError

#: First release whose profile leaves the CUDA context outside the budget (PR #10511).
CONTEXT_OUTSIDE_BUDGET_FROM = (0, 6, 4)
#: First release that runs the V1 engine by default (chunked prefill always on).
V1_DEFAULT_FROM = (0, 8, 0)
#: V0 without chunked prefill profiles at least this many tokens (SchedulerConfig).
V0_MIN_BATCHED_TOKENS = 2048
#: Everything but the weights that a V0 process holds on one GPU before the profile run:
#: CUDA context, cuBLAS/cuDNN handles and workspaces. vllm#10517 logs it directly on an
#: RTX 3090: "Loading model weights took 14.9888 GB" and "initial_memory_usage=15.34GiB ...
#: non_torch_memory=0.35GiB" (Llama-3.1-8B, one GPU): 0.35 GiB in all. With tensor
#: parallelism NCCL and the custom all-reduce buffers come on top (constants.NON_TORCH_GIB_TP
#: minus NON_TORCH_GIB_TP1).
V0_DEVICE_NON_TORCH_GIB_TP1 = 0.35


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``"0.6.3"``, ``"v0.3.3"``, ``"0.6.4.post1"`` -> (major, minor, patch); None stays None."""
    if text is None:
        return None
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?[A-Za-z0-9.+-]*)?", str(text).strip())
    if not m:
        raise RunjobError(f"vllm_version {text!r} is not a version number; write it as pip shows it, e.g. 0.6.3")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def context_inside_budget(version: tuple[int, int, int] | None) -> bool:
    """True for the releases whose profile counts the whole device's used memory."""
    return version is not None and version < CONTEXT_OUTSIDE_BUDGET_FROM


def runs_v0(version: tuple[int, int, int] | None) -> bool:
    """True for the releases that run the V0 engine by default (before 0.8)."""
    return version is not None and version < V1_DEFAULT_FROM


def v0_default_batched_tokens(version: tuple[int, int, int] | None, max_model_len: int) -> int | None:
    """The profile size of a V0 release without chunked prefill; None for V1 (or no version)."""
    if not runs_v0(version):
        return None
    return max(max_model_len, V0_MIN_BATCHED_TOKENS)
