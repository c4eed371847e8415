"""runjob for Hugging Face ``Trainer`` jobs: one callback, no other glue.

    from runjob_core.job.hf import RunjobCallback

    trainer = Trainer(model, args, train_dataset=data, callbacks=[RunjobCallback()])
    trainer.train(resume_from_checkpoint=os.environ.get("RUNJOB_RESUME_FROM") or None)

with ``TrainingArguments(output_dir=os.environ["RUNJOB_CHECKPOINT_DIR"], save_steps=...)``.
The callback

* marks each ``checkpoint-N`` folder complete once Trainer has written it (runjob resumes
  only from complete checkpoints), with how long the save took;
* reports the step, ``max_steps`` and the logged metrics (loss, grad_norm, ...) where
  runjob's monitor and dashboard read them;
* turns the time-limit warning (the signal, or the stop file ``RUNJOB_STOP_FILE`` that
  workers under torchrun/accelerate see) into "save a checkpoint and exit 75" on every
  rank at the same step;
* makes a resume that is already at ``max_steps`` a no-op: the process exits 0 from
  ``train()`` before Trainer would take a step past the end (the code after ``train()``
  does not run in that attempt).

Importing this module imports transformers; ``runjob_core.job`` itself never does. A plain
PyTorch loop gets the same from :func:`runjob_core.job.should_stop`,
:func:`~runjob_core.job.checkpoint_saved`, :func:`~runjob_core.job.progress` and
:func:`~runjob_core.job.exit_to_resume`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Dict, Optional

from transformers import TrainerCallback

from runjob_core.job import checkpoint_saved, exit_to_resume, on_preempt_signal, progress, should_stop

__all__ = ["RunjobCallback"]

#: Trainer's folder prefix (transformers.trainer_utils.PREFIX_CHECKPOINT_DIR).
CHECKPOINT_PREFIX = "checkpoint"


class RunjobCallback(TrainerCallback):
    """Checkpoint markers, progress, metrics and save-on-warning for ``transformers.Trainer``.

    :param progress_every: least seconds between two progress writes made for the step
        alone (log and save events always write): fast steps do not rewrite the file each step.
    """

    def __init__(self, progress_every: float = 5.0) -> None:
        self.progress_every = progress_every
        self.stopped_to_resume = False
        self._last_progress = 0.0
        self._save_started: Optional[float] = None

    # ---------------------------------------------------------------- start and end

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is threading.main_thread():
            on_preempt_signal()  # USR1 sets should_stop(); the default action would kill the job
        if state.max_steps and state.global_step >= state.max_steps:
            # A resume from the checkpoint at max_steps: Trainer (transformers 5) would still
            # take one step before its end-of-training check (4001 of 4000), and nothing in
            # its loop can skip that step, so the process ends here, successfully.
            print(f"[runjob] already at step {state.global_step} of {state.max_steps}: nothing left to train; "
                  "exiting 0 before Trainer takes a step past max_steps", flush=True)
            raise SystemExit(0)

    def on_train_end(self, args, state, control, **kwargs):
        if self.stopped_to_resume:
            print(f"[runjob] saved at step {state.global_step} on the time-limit warning; exiting 75 to be resumed",
                  flush=True)
            exit_to_resume()

    # ---------------------------------------------------------------- steps

    def on_step_end(self, args, state, control, **kwargs):
        finished = bool(state.max_steps) and state.global_step >= state.max_steps
        if _agreed_stop(should_stop()) and not finished:  # at the last step, just finish
            control.should_save = True
            control.should_training_stop = True
            self.stopped_to_resume = True
        if control.should_save:
            self._save_started = time.monotonic()
        now = time.time()
        if state.is_world_process_zero and now - self._last_progress >= self.progress_every:
            self._last_progress = now
            progress(step=state.global_step, total=state.max_steps or None)

    def on_log(self, args, state, control, logs: Optional[Dict[str, Any]] = None, **kwargs):
        if not state.is_world_process_zero:
            return
        self._last_progress = time.time()
        progress(step=state.global_step, total=state.max_steps or None, **_numbers(logs or {}))

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        folder = os.path.join(args.output_dir, f"{CHECKPOINT_PREFIX}-{state.global_step}")
        if not os.path.isdir(folder):
            return  # a subclass saved elsewhere: nothing to mark here
        took = time.monotonic() - self._save_started if self._save_started is not None else None
        self._save_started = None
        checkpoint_saved(folder, step=state.global_step, save_seconds=took, total=state.max_steps or None)


#: Trainer's end-of-run summary (logged once, at the end): not curves, and a one-point
#: chart of each would crowd the dashboard. ``train_loss`` is the run's mean loss.
_SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss",
                 "epoch"}


def _numbers(logs: Dict[str, Any]) -> Dict[str, float]:
    """The logged values that are finite numbers (transformers 5 may log them as strings)."""
    out = {}
    for key, value in logs.items():
        if isinstance(value, bool) or key in _SUMMARY_KEYS:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = number
    return out


def _agreed_stop(local: bool) -> bool:
    """Whether any rank saw the warning, the same answer on every rank.

    The stop file may appear between two ranks' checks: a rank that stopped a step before
    the others would leave them waiting in their next all-reduce. One tiny all-reduce per
    step settles it, only when a process group is running."""
    try:
        import torch.distributed as dist
    except ImportError:
        return local
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return local
    import torch

    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    flag = torch.tensor([1 if local else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())
