"""What ZeRO stages 0-2 hold beyond the model states, read from DeepSpeed's own code.

The ZeRO paper's accounting (weights + gradients + optimizer states, each divided by the
data-parallel degree its stage partitions) is the *resting* memory. Two things come on
top of it in the implementation every ZeRO-1/2 job runs (DeepSpeed's
``deepspeed/runtime/zero/stage_1_and_2.py``, ``DeepSpeedZeroOptimizer``) and in DeepSpeed's
non-ZeRO mixed-precision optimizer (``deepspeed/runtime/fp16/fused_optimizer.py``,
``FP16_Optimizer``):

* the optimizer step needs the gradient in the master copy's precision (fp32), so the
  step builds an fp32 gradient next to the 16-bit ones (:func:`master_step_bytes`);
* ZeRO-1/2 reduce gradients through a preallocated bucket during backward
  (:func:`reduce_bucket_bytes`), which coexists with the activations.

Called by :func:`runjob_core.estimator.training.training` for mixed precision (16-bit
weights and gradients, an fp32 master copy) without CPU offload; stage 3 (parameters
partitioned, FSDP FULL_SHARD) keeps its own accounting there.
"""

from __future__ import annotations

#: DeepSpeed's default ``zero_optimization.reduce_bucket_size`` in elements
#: (``DeepSpeedZeroOptimizer.__init__(reduce_bucket_size=500000000)``, the documented default
#: in the config reference and the value DeepSpeed's ZeRO tutorial sets).
REDUCE_BUCKET_ELEMENTS = 500_000_000


def master_step_bytes(psi: float, num_gpus: int, stage: int, optimizer_temp_b: float) -> float:
    """Bytes the optimizer step adds on top of the model states (16-bit weights, fp32 master).

    ``psi`` parameters, ``stage`` 0-2, ``optimizer_temp_b`` the optimizer's own temporaries
    per parameter it updates (``OPTIMIZERS``; 0 for DeepSpeed's in-place FusedAdam).

    Stage 0 (``FP16_Optimizer.step``): ``_flatten_dense_tensors([p.grad.to(fp32) for p in
    group])`` holds an fp32 copy of every gradient and their flat concatenation at once,
    4 + 4 bytes per parameter, while the 16-bit gradients are still alive; only then are the
    16-bit gradients dropped (``p.grad = None``, -2) and the optimizer runs on the flat fp32
    gradient (4 + its temporaries).

    Stages 1-2 (``DeepSpeedZeroOptimizer.step``): the rank's gradient partition is flattened
    into a 16-bit copy (``self.flatten(self.averaged_gradients[i])``, 2 bytes) and cast to fp32
    (``.to(self.single_partition_of_fp32_groups[i].dtype)``, 4 bytes) before the 16-bit
    gradients are freed; the optimizer then steps the fp32 partition with that gradient.
    Everything scales with the partition, ``psi / num_gpus``.
    """
    if stage == 0:
        return psi * max(8.0, 2.0 + optimizer_temp_b)
    return psi / num_gpus * max(6.0, 2.0 + optimizer_temp_b)


def reduce_bucket_bytes(stage: int, grad_bytes: float) -> float:
    """Bytes of ZeRO-1/2's gradient reduce bucket, alive during backward with the activations.

    ``DeepSpeedZeroOptimizer.setup_buckets`` allocates ``torch.empty(reduce_bucket_size)`` in
    the model's 16-bit dtype whatever the model's size (``contiguous_gradients``, on by
    default), and a second one with ``overlap_comm`` (off by default for stage 1-2). Stage 0
    all-reduces after backward and stage 3 has its own buffers: none here.
    """
    if stage not in (1, 2):
        return 0.0
    return REDUCE_BUCKET_ELEMENTS * grad_bytes
