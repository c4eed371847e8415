"""The label rules, grouped by *family*: one way a framework reports one kind of failure.

A label (``cuda_oom``, ``host_oom``...) is what went wrong; a family is the evidence that says
so, written the way the framework that prints it writes it (read from its source: the message
string and the exception around it).  Each finding names its family's evidence, so a reader
can judge the rule that fired, and the Hyperscan engine reports family ids directly (one
expression per family), so Python only looks at lines that matched a family.

Precision before recall: a finding with action ``stop`` cancels a paid job.  A family only
holds wording that means the failure *happened*, not wording that mentions it (retries that
then succeed, warnings about a possibility, config dumps); ``exclude`` drops the known
look-alikes of a family.

Every pattern is a bytes regex matched against one record (the text between line
terminators), case-sensitive.  The prefilter contract of :mod:`runjob_health._patterns`
holds here too: every match must contain one of that label's ``LABEL_ANCHORS``.
"""

from __future__ import annotations

from typing import NamedTuple


class Family(NamedTuple):
    label: str                  # the finding's label
    evidence: str               # what the matched text is, said in the finding
    patterns: tuple             # bytes regexes, one record each
    exclude: bytes | None = None  # a record that matches this is not this family's evidence
    kind: str | None = None     # a label with several kinds of finding (see KINDS)


_NANV = rb"[-+]?(?:nan|NaN|NAN|inf|Inf|Infinity|infinity)(?![\w.])"
# the key starts at "loss"/"grad": a leading "actor/pg_", "train_", "[" etc. does not
# change whether there is a match, and a leading greedy class would make the
# search quadratic on long lines; the rest of the key is capped at 100 characters for the
# same reason ("lossloss..." for a MiB: an unbounded class scans to the end from each "loss")
_LOSS_KEY = rb"(?:(?:loss|Loss|LOSS)[A-Za-z0-9_/.\]-]{0,100}|(?:grad[_ ]?norm|gradnorm)[A-Za-z0-9_/.-]{0,100})"
_SEP = rb"['\"\]]?(?:\s*[:=]\s*|\s+)['\"]?(?:tensor\()?"
_NAN_LOSS = _LOSS_KEY + _SEP + _NANV
# a tqdm bar's "n/total [...]" then "Killed", its run of digits matched from its first digit
# ((?<!\d): else every digit of a long number starts a search that backtracks over the rest)
_BAR_KILLED = rb"(?<!\d)\d+/\d+ \[[^\]]{0,80}\]\s?Killed\b"
# warnings that quote a failure they recovered from (torchvision's image extension, TF's
# optional CUDA libraries, bitsandbytes on a CPU-only machine) are not import failures
_NATIVE_WARNING = (rb"[Ww]arning|Could not load dynamic library|dlerror|W tensorflow/|"
                   rb"Failed to load image Python extension|will not be available|falling back|fallback")

FAMILIES: tuple[Family, ...] = (
    # ---------------------------------------------------------------- cuda_oom
    Family("cuda_oom", "the framework's allocator said the GPU is out of memory", (
        rb"(?:CUDA|HIP) out of memory",
        rb"MPS backend out of memory",
        rb"CUDA error: out of memory",
        rb"cuda runtime error \(2\) : out of memory",
        rb"THCudaCheck FAIL.{0,200}out of memory",
        rb"torch\.(?:cuda\.)?OutOfMemoryError",
        rb"OutOfMemoryError: CUDA",
        rb"RESOURCE_EXHAUSTED: Out of memory",
    )),
    Family("cuda_oom", "a CUDA library or the driver could not allocate device memory", (
        rb"CUBLAS_STATUS_ALLOC_FAILED",
        rb"CUDNN_STATUS_ALLOC_FAILED",
        rb"CUDA_ERROR_OUT_OF_MEMORY",
        rb"cudaErrorMemoryAllocation",
    )),
    # (SGLang's "Decode out of memory happened. #retracted_reqs" is a retraction it recovers
    # from; its RuntimeError "Decode/Prefill out of memory. Try to lower your batch size" is not)
    Family("cuda_oom", "the inference engine found no device memory left for its KV cache", (
        rb"No available memory for the cache blocks",
        rb"(?:Decode|Prefill) out of memory\. Try to lower your batch size",
        rb"larger than the maximum number of tokens that can be stored in KV cache",
        rb"KV cache is needed, which is larger than the available KV cache memory",
    )),
    # vLLM V1 (worker start-up: free memory below gpu_memory_utilization x total), SGLang
    # (memory pool: max_total_num_tokens <= 0 after the weights), TGI (warm-up prefill)
    Family("cuda_oom", "the inference engine's start-up memory check refused the device", (
        rb"Free memory on device\b.{0,80}\bon startup is less than desired GPU memory utilization",
        rb"Not enough memory\. Please try to increase --mem-fraction-static",
        # TGI's warm-up (text-generation-server, every model class): the advice to decrease
        # --max-batch-prefill-tokens follows, on the same line or the next
        rb"Not enough memory to handle \d+ prefill tokens",
    )),
    # ---------------------------------------------------------------- host_oom
    Family("host_oom", "the scheduler or the kernel reported an OOM kill", (
        rb"Detected \d+ oom[-_ ]?kill event",
        rb"\bOOM Killed\b",
        rb"\bOOMKilled\b",
        rb"task \d+: Out Of Memory",
        rb"\bOut Of Memory\b",
        rb"\bexceeded memory limit\b",
        rb"\bExceeded (?:job|step) memory limit(?! at some point)",
        rb"Out of memory: Kill(?:ed)? process",
        rb"Memory cgroup out of memory",
    )),
    Family("host_oom", "a host allocation failed (Python MemoryError, PyTorch's CPU allocator)", (
        rb"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        rb"(?<![A-Za-z])MemoryError\b",
    )),
    # torchrun/elastic's ChildFailedError summary, DeepSpeed's launcher (sigkill_handler logs
    # "{cmd} exits with return code = {code}"), subprocess.CalledProcessError for a child that
    # died of a signal (accelerate launch), torch.multiprocessing.spawn's ProcessExitedException,
    # the DataLoader's worker watchdog: all say only that the kernel killed a child with SIGKILL
    Family("host_oom", "a launcher reported a child killed by SIGKILL (the kernel's OOM killer)", (
        rb"\bexitcode\s*:\s*-9\b",
        rb"Signal 9 \(SIGKILL\) received by PID",
        rb"exits with return code = -9\b",
        rb"died with <Signals\.SIGKILL: 9>",
        rb"process \d+ terminated with signal SIGKILL",
        rb"is killed by signal: Killed",
        # "Killed" glued to a tqdm bar (loading checkpoint shards into host RAM)
        _BAR_KILLED,
    )),
    # ---------------------------------------------------------------- nan_loss
    Family("nan_loss", "a logged loss or gradient norm is NaN/Inf", (
        _NAN_LOSS,
        rb"\b[Ll]oss (?:is|became|becomes|went to) [-+]?(?:nan|NaN|inf|Inf)\b",
        rb"returned nan values",
        rb"found NaN in",
    )),
    Family("nan_loss", "the mixed-precision loss scaler gave up (overflow at every scale)", (
        rb"Current loss scale already at minimum",
    )),
    # ---------------------------------------------------------------- scheduler end states
    Family("time_limit", "the scheduler's time-limit notice", (
        rb"DUE TO TIME LIMIT",
        rb"PBS: job killed: walltime \d+ exceeded limit",
        rb"TERM_RUNLIMIT",
    )),
    Family("preempted", "the scheduler's preemption notice", (
        rb"DUE TO PREEMPTION",
        rb"TERM_PREEMPT",
        rb"\b(?:[Cc]luster|[Ii]nstance|[Jj]ob|[Nn]ode|VM|[Pp]od|[Ww]orker|[Tt]ask) (?:is |was |has been |got )?preempted\b",
        rb"\bPreempted\b",
    ), exclude=rb"can happen (?:when|if)|possible causes|potential root causes|common causes"),
    Family("preempted", "a cloud provider's spot/preemption notice or its metadata server", (
        rb"[Ss]pot (?:[Ii]nstance )?[Ii]nterruption",
        rb"[Ii]nstance is going to be interrupted",
        rb"[Tt]ermination is imminent",
        rb"\bcompute\.instances\.preempted\b",
        rb"instance/preempted\b.{0,60}\bTRUE\b",
        rb"\b(?:[Pp]reemption|[Tt]ermination|[Ii]nterruption) notice (?:received|detected)",
        rb"(?:[Rr]eceived|[Dd]etected|[Gg]ot) (?:a |an |the )?(?:spot |preemption |termination |interruption )+notice",
        rb"spot/(?:instance-action|termination-time)\b.{0,80}(?:terminate|stop|hibernate|\d{4}-\d\d-\d\dT)",
        rb"\"action\\?\"\s*:\s*\\?\"(?:terminate|stop|hibernate)\\?\"\s*,\s*\\?\"time\\?\"",
        rb"\"EventType\"\s*:\s*\"Preempt\"",
    ), exclude=rb"can happen (?:when|if)|possible causes|potential root causes|common causes"),
    Family("preempted", "Kubernetes evicted the pod (node pressure or node shutdown)", (
        rb"The node was low on resource: \[?\w",
        rb"The node had condition: \[\w*Pressure\]",
        rb"^\s*Reason:\s+Evicted\b",
        rb"\s\d+/\d+\s+Evicted\s+\d",
        rb"Pod was terminated in response to imminent node shutdown",
    ), exclude=rb"can happen (?:when|if)|possible causes|potential root causes|common causes"),
    # ---------------------------------------------------------------- node_fail
    Family("node_fail", "the scheduler reported a node failure", (
        rb"DUE TO NODE FAILURE",
        rb"\bNODE_FAIL\b",
        rb"\b[Nn]ode [Ff]ailure\b",
    )),
    Family("node_fail", "the GPU driver reported a hardware fault (Xid, uncorrectable ECC, lost GPU)", (
        rb"NVRM: Xid",
        rb"\bXid \(PCI:",
        rb"[Uu]ncorrectable ECC",
        rb"ECC_UNCORRECTABLE",
        rb"cudaErrorECCUncorrectable",
        rb"fallen off the bus",
        rb"GPU is lost",
    )),
    # node loss in distributed runtimes (Ray lists OOM and preemption as *possible* causes)
    Family("node_fail", "the distributed runtime lost a node, actor or worker", (
        rb"has been marked (?:as )?dead because the (?:detector|monitor) has missed too many heartbeats",
        rb"mistakenly been marked (?:as )?dead",
        rb"\b(?:RayActorError|ActorDiedError)\b",
        rb"The actor died unexpectedly before finishing this task",
        rb"The actor is dead because its worker process has died",
        rb"A worker died or was killed while executing (?:a |the )?task",
        rb"Task failed because the node it was running on is dead",
        # NCCL watchdog: a collective timed out on *another* (named) rank
        rb"Received a dump signal due to a collective timeout from\s+rank \d+",
    )),
    # srun could not launch tasks on a node; squeue's job reason for a node that went down
    # under it or a launch that failed there; a node's down/drain reason as sinfo -R
    # ("%50E %9u %19H %N": reason, user, timestamp) and scontrol show node
    # ("Reason=... [user@timestamp]") print it
    Family("node_fail", "SLURM reported a node down or a launch that failed on it", (
        rb"srun: error: Task launch for \S+ failed on node \S+",
        rb"\((?:launch failed requeued held|NodeDown)\)",
        rb"\bReason=(?:launch_failed_requeued_held|NodeDown)\b",
        rb"(?:Kill task failed|Not responding|Node unexpectedly rebooted|batch job complete failure|"
        rb"Prolog error|Epilog error|NHC: [^\n]{1,60}?)\s+\S+\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d",
        rb"\bReason=(?:Kill task failed|Not responding|Node unexpectedly rebooted|batch job complete failure|"
        rb"Prolog error|Epilog error|NHC[^\[\n]{0,60}?) ?\[\S+@\d{4}-\d\d-\d\dT",
    )),
    # ---------------------------------------------------------------- nccl_error
    Family("nccl_error", "NCCL or the process group reported a failed or timed-out collective", (
        rb"Watchdog caught collective operation timeout",
        rb"NCCL [Ee]rror",
        rb"\bnccl(?:Internal|System|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error\b",
        rb"\[E[\d :.]{0,40}ProcessGroupNCCL",
        rb"DistBackendError",
        rb"Some NCCL operations have failed or timed out",
        rb"NCCL communicator was aborted",
        # not every "NCCL WARN": the proxy thread warns at a clean teardown too.  These are
        # NCCL's own failure wordings (net_ib.cc completion errors, CUDACHECK, SYSCHECK)
        rb"NCCL WARN NET/IB ?: Got completion from peer",
        rb"NCCL WARN Cuda failure",
        rb"NCCL WARN Call to \S+ failed",
    ), exclude=rb"\bNCCL INFO\b"),
    # ---------------------------------------------------------------- disk_full
    Family("disk_full", "the OS refused a write (no space left, quota exceeded)", (
        rb"No space left on device",
        rb"\[Errno 28\]",
        rb"\bENOSPC\b",
        rb"[Dd]isk quota exceeded",
        rb"\[Errno 122\]",
        rb"Not enough (?:free )?disk space",
    )),
    # ---------------------------------------------------------------- hub_auth_error
    Family("hub_auth_error", "the Hub answered 401/403 or named a gated or missing repo", (
        rb"\b40[13] Client Error",
        rb"Invalid user token",
        rb"Invalid credentials in Authorization header",
        rb"GatedRepoError",
        rb"Cannot access gated repo",
        rb"You are trying to access a gated repo",
        rb"Access to model \S+ is restricted",
        rb"Repo model \S+ is gated",
        rb"RepositoryNotFoundError",
        rb"Repository Not Found for url",
        rb"Unauthorized for url",
        rb"LocalTokenNotFoundError",
        # huggingface_hub >= 1.0 (httpx) and git wording
        rb"[Cc]lient error:? ['(]?40[13] [A-Za-z ]+['\)]? for url",
        rb"Invalid username or password",
        rb"fatal: Authentication failed for '?https?://(?:[\w-]+\.)*(?:huggingface\.co|hf\.co)",
        rb"Password authentication in git is no longer supported",
    )),
    # ---------------------------------------------------------------- submit_error
    Family("submit_error", "the scheduler rejected the submission", (
        rb"\bsbatch: error:",
        rb"\bsalloc: error: Job submit/allocate failed",
        rb"Batch job submission failed",
        rb"\bsrun: error: Unable to allocate resources",
    )),
    # srun inside the allocation asked for what the allocation does not hold (srun.c:
    # "Unable to create step for job %u: %m"); "already completing" follows a cancel or a
    # time limit and is their consequence, not a step request problem
    Family("submit_error", "srun could not create a job step inside the allocation", (
        rb"srun: error: Unable to create (?:job )?step(?: for job \d+)?: (?!Job/step already completing)",
    ), kind="step"),
    # ---------------------------------------------------------------- import_error
    Family("import_error", "Python could not import a module", (
        rb"\bModuleNotFoundError\b(?::|$)",
        rb"\bImportError\b(?::|$)",
        rb"\bNo module named ['\"]",
    )),
    Family("import_error", "a command is missing in the job environment", (
        rb": command not found",
        rb"execve\(\): \S+: No such file or directory",
    )),
    # the dynamic loader's own words (OSError from ctypes / torch's library loading, which
    # never say ImportError), glibc/libstdc++ too old for a wheel, bitsandbytes' setup
    # failure, and the lazy-import wrappers of transformers/diffusers/accelerate, which
    # re-raise an import failure as RuntimeError "Failed to import X because of ..."
    Family("import_error", "a native library failed to load (the loader, a setup check or a lazy-import wrapper)", (
        rb"\.so[.\d]*: undefined symbol: \S",
        rb"\.so[.\d]*: cannot open shared object file",
        rb"version `(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found",
        rb"CUDA Setup failed despite GPU being available",
        rb"CUDA SETUP: Required library version not found",
        rb"Could not find the bitsandbytes CUDA binary",
        rb"Failed to import [\w.]+ because of the following error \(look up to see its traceback\)",
    ), exclude=_NATIVE_WARNING),
)

# Hyperscan runs a wider, cheaper expression for a few patterns (the prefilter only has to
# match at least as much; Python then runs the real pattern on the line).  The loss pattern
# starts at "loss", which is on nearly every line of a training log, and the tqdm "Killed"
# pattern at a digit: keyed on the rare part instead, the scan runs ~2x faster.
# tests/test_health_engines.py checks that each stands for a superset of its pattern.
PREFILTER: dict[bytes, bytes] = {
    _NAN_LOSS: rb"(?:\s*[:=]\s*|\s+)['\"]?(?:tensor\()?[-+]?(?:nan|NaN|NAN|inf|Inf|Infinity|infinity)(?:[^\w.]|$)",
    _BAR_KILLED: rb"\]\s?Killed",
}

LABEL_ORDER: tuple[str, ...] = tuple(dict.fromkeys(f.label for f in FAMILIES))
LABEL_PATTERNS: dict[str, list[bytes]] = {
    label: [p for f in FAMILIES if f.label == label for p in f.patterns] for label in LABEL_ORDER
}
