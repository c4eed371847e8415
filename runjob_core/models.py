"""Frozen records passed between the core and its plugins.

Every record a hook returns names its ``source`` (the plugin that made it), so the user
can always see which plugin said what. Records are immutable: a hook that changes
something returns a new one (``attrs.evolve``).
"""

from __future__ import annotations

import re
from typing import Any

from attrs import field, frozen

#: Scheduler states, the same vocabulary for every backend.
PENDING = "PENDING"
RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
TIMEOUT = "TIMEOUT"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
PREEMPTED = "PREEMPTED"
NODE_FAIL = "NODE_FAIL"
REQUEUED = "REQUEUED"
LOST = "LOST"
SUBMITTING = "SUBMITTING"

ACTIVE_STATES = frozenset({SUBMITTING, PENDING, RUNNING, REQUEUED})
TERMINAL_STATES = frozenset({COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, PREEMPTED, NODE_FAIL, LOST})
STATES = ACTIVE_STATES | TERMINAL_STATES

# A job name reaches file names, #SBATCH lines and remote paths: keep it boring.
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@frozen
class ClusterConfig:
    """One entry of ``clusters.yaml`` (field names follow the seed skill's config)."""

    name: str
    type: str = "local"
    host: str | None = None
    user: str | None = None
    port: int = 22
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    allow_unknown_host: bool = False
    default_partition: str | None = None
    default_account: str | None = None
    scratch_path: str | None = None
    gres_format: str = "typed"
    gpu_type: str | None = None
    modules: tuple[str, ...] = ()
    conda_env: str | None = None
    env: dict[str, str] = field(factory=dict)
    settings: dict[str, Any] = field(factory=dict)
    #: The scheduler already gives each job its own TMPDIR: the script leaves it alone.
    private_tmpdir: bool = False
    source: str = "built-in"


@frozen
class ModelSpec:
    name: str | None = None
    path: str | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    max_tokens: int | None = None


@frozen
class Resources:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    nodes: int = 1
    gpus: int = 0
    gpu_type: str | None = None
    cpus: int = 1
    mem: str | None = None
    time: str | None = None


@frozen
class DataSpec:
    input: str | None = None
    output: str = "results"


@frozen
class CheckpointSpec:
    dir: str = "checkpoints"
    every: str | None = None
    #: Seconds before the time limit at which SLURM sends USR1 (training template). Unset:
    #: three times the longest checkpoint save measured in earlier attempts (+60 s), else 300.
    signal_margin: int | None = None


@frozen
class UploadSpec:
    repo: str | None = None
    every: str | None = None
    endpoint: str | None = None
    private: bool = True


@frozen
class CanarySpec:
    limit: int = 10
    time: str | None = None


@frozen
class ResumePolicy:
    auto: bool = True
    max_attempts: int = 5
    max_preemptions: int = 10
    max_timeouts: int = 10
    max_failures: int = 1


@frozen
class HealthPolicy:
    #: Warn when a RUNNING job shows no new progress (step, rows, log bytes) for this long.
    stall_minutes: float = 30.0
    #: Also stop it once it has been stalled for twice the window (default: only warn).
    stop_when_stalled: bool = False
    disk_low_percent: float = 10.0


@frozen
class JobSpec:
    """A validated ``job.yaml``."""

    name: str
    command: str
    template: str = "base"
    cluster: str = "local"
    workdir: str | None = None
    benchmark: str | None = None
    model: ModelSpec = ModelSpec()
    resources: Resources = Resources()
    data: DataSpec = DataSpec()
    params: dict[str, Any] = field(factory=dict)
    env: dict[str, str] = field(factory=dict)
    setup: tuple[str, ...] = ()
    checkpoint: CheckpointSpec = CheckpointSpec()
    upload: UploadSpec = UploadSpec()
    canary: CanarySpec = CanarySpec()
    resume: ResumePolicy = ResumePolicy()
    health: HealthPolicy = HealthPolicy()
    columns: dict[str, str] = field(factory=dict)
    #: Where the spec came from (a file path), for messages; not part of the spec hash.
    source: str = "<memory>"
    #: Folder that relative paths in the spec are relative to.
    base_dir: str = "."


@frozen
class Rendered:
    """A job script ready to submit."""

    script: str
    template: str
    source: str
    script_name: str = "run.sh"
    #: Extra files to place beside the script: name in the job folder -> text.
    files: dict[str, str] = field(factory=dict)


@frozen
class Submission:
    """A handle on one attempt of one job at a backend."""

    job_id: str
    attempt: int
    backend: str
    cluster: str
    backend_job_id: str
    tag: str
    #: The job's own folder (script, params, progress, results, checkpoints) on the cluster.
    job_dir: str
    #: Folder the job runs in, on the cluster.
    workdir: str
    #: Combined stdout/stderr log on the cluster.
    log_path: str
    #: Results folder and progress file on the cluster.
    results_dir: str
    checkpoint_dir: str
    progress_path: str
    submitted_at: float
    source: str
    extra: dict[str, str] = field(factory=dict)


@frozen
class JobStatus:
    """What a backend knows about one submission right now."""

    state: str
    source: str
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    node: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@frozen
class Finding:
    """Something a health check noticed, and what to do about it."""

    label: str
    severity: str  # "error" | "warning" | "info"
    message: str
    action: str  # "stop" | "resume" | "retry" | "warn" | "continue"
    source: str
    line: int | None = None
    text: str | None = None


@frozen
class Artifact:
    """A result produced by a job: a local folder, a Hub revision, a validation verdict."""

    name: str
    kind: str
    location: str
    source: str
    rows: int | None = None
    data: dict[str, Any] = field(factory=dict)


@frozen
class Estimate:
    """A pre-flight answer: memory, time, queue or cost."""

    source: str
    summary: str
    fits: bool | None = None
    suggestions: tuple[str, ...] = ()
    data: dict[str, Any] = field(factory=dict)


@frozen
class ResumePlan:
    """How to continue a job from where it stopped."""

    source: str
    reason: str
    checkpoint: str | None = None
    step: int | None = None
    env: dict[str, str] = field(factory=dict)


@frozen
class Reference:
    """A benchmark reference: how to evaluate it right and what to check in a spec."""

    name: str
    source: str
    aliases: tuple[str, ...] = ()
    path: str | None = None
    rules: tuple[dict[str, Any], ...] = ()
    body: str = ""


@frozen
class CheckResult:
    """One row of ``runjob clusters check``: what was checked, and the fix if it failed."""

    check: str
    ok: bool
    detail: str
    source: str
    fix: str | None = None
