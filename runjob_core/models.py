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
#: runjob asked the backend to cancel; the attempt stays active (polled) until a poll says
#: how it really ended: CANCELLED, or the state it had reached before the cancel arrived.
CANCELLING = "CANCELLING"
#: The user told runjob to stop following an attempt it can no longer reach (``runjob
#: forget``, ``runjob cancel --force``). Nothing was stopped: the job may still run.
FORGOTTEN = "FORGOTTEN"

ACTIVE_STATES = frozenset({SUBMITTING, PENDING, RUNNING, REQUEUED, CANCELLING})
TERMINAL_STATES = frozenset({COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, PREEMPTED, NODE_FAIL, LOST, FORGOTTEN})
STATES = ACTIVE_STATES | TERMINAL_STATES

#: Artifact kinds (:attr:`Artifact.kind`) the core and the built-in plugins give a meaning to;
#: a plugin may use other kinds (shown as they are). The backend's downloaded results folder:
#: ``location`` the local folder, ``rows`` the rows counted, ``data["files"]`` the files brought.
ARTIFACT_RESULTS = "results"
#: Something went wrong; ``data["severity"]`` (``"error"`` stops the chain from reporting
#: success, ``"warning"`` is shown) and ``data["message"]``.
ARTIFACT_PROBLEM = "problem"
#: Published on the Hugging Face Hub (runjob-hub): ``name`` the repo, ``location`` its URL,
#: ``data["revision"]`` the commit.
ARTIFACT_HUB = "hub"
#: The Hub copy read back and compared with the local rows (runjob-hub).
ARTIFACT_VERIFIED = "verified"
#: The results validated against the spec (runjob-hub): ``data["token_range"]``,
#: ``data["score_range"]`` where the rows have them.
ARTIFACT_VALIDATION = "validation"
#: What the attempt cost (a machine-per-job backend's bill).
ARTIFACT_COST = "cost"
#: Measured peak memory, kept for the next pre-flight's estimate.
ARTIFACT_MEMORY = "memory"
#: Measured throughput, kept for the next pre-flight's time estimate.
ARTIFACT_THROUGHPUT = "throughput"

# A job name reaches file names, #SBATCH lines and remote paths: keep it boring.
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@frozen
class ClusterConfig:
    """One entry of ``clusters.yaml``: the keys every backend shares (field names follow the
    seed skill's config). A backend's own keys (SLURM's ``default_partition``, RunPod's
    ``gpu_types``) are its declared options, in :attr:`options`."""

    name: str
    type: str = "local"
    host: str | None = None
    user: str | None = None
    port: int = 22
    identity_file: str | None = None
    known_hosts: str | None = None
    proxy_jump: str | None = None
    allow_unknown_host: bool = False
    scratch_path: str | None = None
    gpu_type: str | None = None
    conda_env: str | None = None
    env: dict[str, str] = field(factory=dict)
    settings: dict[str, Any] = field(factory=dict)
    #: The scheduler already gives each job its own TMPDIR: the script leaves it alone.
    private_tmpdir: bool = False
    #: The backend's own keys, written flat beside the core's in the entry and structured by
    #: the class its :class:`BackendInfo` declares (``None`` when it declares none; a plain
    #: mapping, unchecked, while its backend is not installed). See
    #: :mod:`runjob_core.config.options`.
    options: Any = None
    source: str = "built-in"


@frozen
class ModelSpec:
    name: str | None = None
    path: str | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    max_tokens: int | None = None
    #: Inference engine the memory estimate models: vllm | hf | sglang (default: vllm for
    #: the vllm template, hf for others).
    engine: str | None = None
    #: Why max_tokens / max_model_len is below the model's full length (pre-flight refuses it otherwise).
    max_tokens_reason: str | None = None
    #: vllm template: serve the model (OpenAI API) for the command; false runs vLLM in the job's own process.
    serve: bool = True
    #: Extra ``vllm serve`` arguments, each one shell-quoted.
    serve_args: tuple[str, ...] = ()
    #: How long the server may take to answer /health (a duration; unset: 20m).
    startup_timeout: str | None = None


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
    #: Seconds between GPU telemetry samples the job script takes with nvidia-smi (0: none).
    gpu_sample_seconds: int = 30
    #: A finding when a running job's GPUs stay below 5% utilisation this long.
    gpu_idle_minutes: float = 15.0


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
class ScriptModel:
    """The one text the scripts of an array's jobs are made from: each job's script is
    ``text`` with ``id_in`` replaced by its job id, then ``name_in`` by its job name (both
    stand-ins are random letters, digits and ``-``; the names and ids put in are letters,
    digits, ``.``, ``_`` and ``-``). See :func:`~runjob_core.hookspecs.runjob_submit_array`."""

    text: str
    name_in: str
    id_in: str
    #: ``text`` cut at each stand-in: (pieces, where the ids go, where the names go), made once.
    _cut: tuple[list[str], list[int], list[int]] = field(init=False, eq=False, repr=False)

    @_cut.default
    def _cut_at_stand_ins(self) -> tuple[list[str], list[int], list[int]]:
        import re

        pieces = re.split(f"({re.escape(self.id_in)}|{re.escape(self.name_in)})", self.text)
        return (pieces, [i for i, p in enumerate(pieces) if i % 2 and p == self.id_in],
                [i for i, p in enumerate(pieces) if i % 2 and p == self.name_in])

    def script_for(self, name: str, job_id: str) -> str:
        """``text`` with ``id_in`` replaced by *job_id*, then ``name_in`` by *name* (one join of
        the pieces: two replacements over the whole text were ~6 us an element)."""
        pieces, ids, names = self._cut
        made = pieces.copy()
        for i in ids:
            made[i] = job_id
        for i in names:
            made[i] = name
        return "".join(made)


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
    #: The machine the attempt runs on, when the backend created one for it
    #: (:func:`~runjob_core.hookspecs.runjob_provision`); ``None`` on a standing cluster.
    machine: Machine | None = None


@frozen
class Layout:
    """Where one attempt's files live on the machine that runs it (all absolute paths).

    ``<scratch>/jobs/<name>/<runjob id>/`` holds the script, params, progress, results and
    checkpoints; attempts of one job share it, so a resumed attempt continues the same
    results. ``sync_from`` is the local workdir uploaded to ``workdir`` (``None`` when the
    job runs where the workdir already is).
    """

    scratch: str
    job_dir: str
    workdir: str
    sync_from: str | None
    results_dir: str
    checkpoint_dir: str
    progress_path: str
    params_path: str
    log_path: str
    lib_dir: str
    cache_dir: str
    #: This attempt's job script (``run.<attempt>.sh``): what the backend submits, so that a
    #: resubmission never overwrites the script of a job still waiting in the queue.
    script_path: str = ""


@frozen
class Machine:
    """A machine a backend created for one attempt (a rented pod, a cloud VM).

    Returned by :func:`~runjob_core.hookspecs.runjob_provision`, kept in the store with the
    attempt, and handed back to :func:`~runjob_core.hookspecs.runjob_transport` so every
    later step (staging, logs, progress, collect, resume) reaches the attempt's own machine.
    """

    #: The backend's id for it (a pod id).
    id: str
    #: How to reach it over SSH; ``None`` until it is reachable.
    host: str | None
    port: int
    user: str
    source: str
    #: Backend data kept with it (JSON-safe). ``usd_per_hour``, when given, is the price
    #: ``runjob status`` multiplies by the attempt's time for its cost so far (a ``cost``
    #: artifact from collect, ``data={"usd": ...}``, replaces the estimate with the bill).
    data: dict[str, Any] = field(factory=dict)


@frozen
class Attempt:
    """One attempt of one job, as the core hands it to render, submit and reattach.

    Built by the core before :func:`~runjob_core.hookspecs.runjob_render`; a backend never
    makes one. ``tag`` is what the backend attaches to the job (a SLURM ``--comment``, a pod
    name) so that a restarted runjob finds it again.
    """

    job_id: str
    n: int
    tag: str
    layout: Layout
    #: The checkpoint the attempt resumes from, and the environment the resume plan gave.
    resume_from: str | None = None
    resume_env: dict[str, str] = field(factory=dict)
    #: Row limit of a canary run (``RUNJOB_LIMIT``), else ``None``.
    limit: int | None = None
    #: The machine created for this attempt by :func:`runjob_provision`, if any.
    machine: Machine | None = None

    def submission(self, *, backend: str, cluster: str, backend_job_id: str, source: str,
                   extra: dict[str, str] | None = None) -> Submission:
        """The :class:`Submission` of this attempt with every path (and the machine) filled in."""
        import time

        layout = self.layout
        return Submission(
            job_id=self.job_id, attempt=self.n, backend=backend, cluster=cluster,
            backend_job_id=backend_job_id, tag=self.tag, job_dir=layout.job_dir, workdir=layout.workdir,
            log_path=layout.log_path, results_dir=layout.results_dir, checkpoint_dir=layout.checkpoint_dir,
            progress_path=layout.progress_path, submitted_at=time.time(), source=source, extra=extra or {},
            machine=self.machine,
        )

    def template_vars(self) -> dict[str, Any]:
        """The ``runjob`` variables of the job templates."""
        from runjob_core import __version__
        from runjob_core.gpu import TELEMETRY_FIELDS

        layout = self.layout
        return {
            "version": __version__, "id": self.job_id, "attempt": self.n, "tag": self.tag,
            "job_dir": layout.job_dir, "workdir": layout.workdir, "results_dir": layout.results_dir,
            "checkpoint_dir": layout.checkpoint_dir, "progress_path": layout.progress_path,
            "params_path": layout.params_path, "log_path": layout.log_path, "lib_dir": layout.lib_dir,
            "cache_dir": layout.cache_dir, "scratch": layout.scratch, "resume_from": self.resume_from or "",
            "resume_env": self.resume_env, "limit": self.limit, "gpu_telemetry_fields": TELEMETRY_FIELDS,
        }


@frozen
class BackendInfo:
    """What a backend declares about itself (:func:`~runjob_core.hookspecs.runjob_backend_info`)."""

    #: The backend name: its entry-point name and the ``type:`` in clusters.yaml.
    name: str
    source: str
    #: An attrs class of the backend's own cluster keys (flat in the cluster entry, beside
    #: ``host`` and ``scratch_path``); validated like the core's keys, unknown keys stay
    #: errors. The structured value is ``cluster.options``. ``None``: no keys of its own.
    #: Its fields may carry help and choices, and the class rules across keys and the rows
    #: that show a cluster: :class:`runjob_core.config.options.ClusterOptions`.
    options: type | None = None
    #: Core keys a cluster of this backend must set (``host`` for a login node over SSH).
    required_keys: tuple[str, ...] = ()
    #: ``True`` when the backend creates a machine per attempt (:func:`runjob_provision`):
    #: there is no standing host, so the core's host checks (connect, whoami, scratch,
    #: disk) are skipped in ``runjob clusters check`` and the backend's rows replace them;
    #: and each attempt's machine is given back (:func:`runjob_release`) as soon as the
    #: attempt ended, its files copied home first (:mod:`runjob_core.collecting.harvest`).
    machine_per_job: bool = False
    #: Seconds between monitoring cycles while jobs change (the monitor backs off to
    #: ``max_poll_interval`` while nothing changes).
    poll_interval: float = 5.0
    max_poll_interval: float = 30.0
    #: ``True`` when the backend's script (``runjob_render`` with its own templates and the
    #: core's) depends on the job's name and the attempt's job id only through their text
    #: (as given, inside paths, tags and quoted values) and not at all on ``job.params``. The
    #: elements of a sweep's array that differ only in name and params are then rendered once
    #: and each element's script is that text with its name and id put in
    #: (:mod:`runjob_core.sweep._scripts`, checked against real renders of the first and last).
    scripts_by_substitution: bool = False


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
    #: For ``LOST``: ``True`` when the backend knows the work can continue on a new
    #: machine (a reclaimed spot pod), so the core resumes it under ``resume.max_preemptions``.
    #: ``None``/``False``: a lost job is reported, not resumed.
    resumable: bool | None = None

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


@frozen
class ResultsTable:
    """A harness's own output read as one table (:func:`runjob_core.hookspecs.runjob_read_results`).

    ``rows`` are the per-sample rows that validation, the report and publishing all use;
    ``tasks`` the harness's aggregate scores, ``{task: {metric: value}}``; ``files`` the
    files read, relative to the results folder.
    """

    source: str
    reader: str
    rows: tuple[dict[str, Any], ...]
    tasks: dict[str, dict[str, float]] = field(factory=dict)
    files: tuple[str, ...] = ()


@frozen
class TaggedJob:
    """A job a backend found on its cluster carrying runjob's tag
    (:func:`runjob_core.hookspecs.runjob_list_tagged`): what adopting it needs."""

    tag: str                        # runjob:<job id>:<attempt>
    backend_job_id: str
    state: str                      # PENDING, RUNNING, ... (the scheduler's, in runjob's words)
    source: str
    job_dir: str | None = None      # the job's folder on the cluster (its runjob.json), when known
    spec_hash: str | None = None    # when the backend carries it with the job itself
    machine: Machine | None = None  # the machine it runs on, for a backend with one per job (a pod)
