"""What the local backend says before a job starts: the machine's GPUs (``runjob clusters
check``) and whether a job's GPUs can ever be had here (pre-flight)."""

from __future__ import annotations

import attrs

from runjob_core.config.options import ClusterOptions, option
from runjob_core.gpu import GpuQueryError
from runjob_core.models import CheckResult, Estimate

SOURCE = "runjob-local"


@attrs.frozen
class LocalSettings(ClusterOptions):
    """The keys of a ``type: local`` cluster beside the core's."""

    #: GiB of a GPU's memory that processes runjob did not start may use before the GPU
    #: counts as busy (someone's notebook holding a GPU is not a free GPU).
    gpu_busy_gib: float = option(1.0, help="GiB of a GPU's memory others may use before the GPU counts as busy")

    def problems(self, cluster):
        if self.gpu_busy_gib < 0:
            yield "gpu_busy_gib", f"gpu_busy_gib must be 0 or more, not {self.gpu_busy_gib:g}"


def estimate(job, cluster, context) -> Estimate | None:
    """Refuse GPUs this machine does not have (count or type), naming what it has; with no
    ``gpu_type`` set anywhere, the memory estimate is made for the GPUs found."""
    if job.resources.gpus <= 0:
        return None  # a CPU job: not even a look at nvidia-smi
    from runjob_local import _gpus

    try:
        gpus = _gpus.inventory(context)
    except GpuQueryError as exc:
        return Estimate(source=SOURCE, summary=f"{job.source}: cannot see this machine's GPUs: {exc}", fits=False)
    why = _gpus.refusal(job, gpus)
    if why:
        return Estimate(source=SOURCE, summary=f"{job.source}: {why}", fits=False, data={"gpus": _listing(gpus)})
    summary = f"this machine has {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}: {_gpus.describe(gpus)}"
    found = Estimate(source=SOURCE, summary=summary, fits=True, data={"gpus": _listing(gpus)})
    if job.resources.gpu_type or cluster.gpu_type or not (job.model.name or job.model.path):
        return found
    from runjob_core.defaults import runjob_estimate as core_estimate

    # The core's memory estimate needs a GPU type; the GPUs found are the ones the job gets.
    memory = core_estimate(job=job, cluster=attrs.evolve(cluster, gpu_type=gpus[0].name), context=context)
    if memory is None:
        return found
    return attrs.evolve(memory, source=SOURCE, summary=f"{memory.summary} ({summary})")


def _listing(gpus) -> list[dict]:
    return [{"index": g.index, "uuid": g.uuid, "name": g.name, "memory_total_mib": g.memory_total_mib,
             "memory_used_mib": g.memory_used_mib} for g in gpus or []]


def check_gpus(cluster, context) -> list[CheckResult]:
    from runjob_local import _gpus

    try:
        gpus = _gpus.inventory(context)
    except GpuQueryError as exc:
        return [CheckResult(check="gpus", ok=False, detail=str(exc), source=SOURCE,
                            fix="run nvidia-smi by hand; jobs with resources.gpus > 0 are refused until it answers")]
    if gpus is None:
        return [CheckResult(check="gpus", ok=True, detail="no nvidia-smi: no GPU (jobs with resources.gpus: 0 only)",
                            source=SOURCE)]
    rows = [CheckResult(check="gpus", ok=True, detail=f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}", source=SOURCE)]
    for gpu in gpus:
        rows.append(CheckResult(check=f"gpu {gpu.index}", ok=True, detail=f"{gpu.describe()}, {gpu.uuid}", source=SOURCE))
    return rows


def telemetry_memory(job, submission, context):
    """The ``memory`` artifact of a local GPU job from the peak its GPU telemetry saw (when
    its log printed none), so pre-flight says "measured on this cluster" next time."""
    from runjob_core.gpu import telemetry as gpu_telemetry
    from runjob_core.estimator import measured

    cluster = context.clusters.get(submission.cluster)
    if job is None or cluster is None or job.resources.gpus <= 0:
        return None
    usage = gpu_telemetry.usage([p for p in context.store.metrics(submission.job_id) if p[0] == submission.attempt])
    if not usage:
        return None
    return measured.peak_artifact(job, cluster, int(usage["peak_memory_mib"]) << 20, "nvidia-smi telemetry", SOURCE)
