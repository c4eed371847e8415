"""Patterns for the streaming log health checks (stdlib only, bytes regexes).

Everything here works on *records*: the bytes between two line terminators
(``\\n`` or ``\\r``; tqdm redraws with ``\\r``).  Line numbers count ``\\n`` only.

Speed contract
--------------
``_scan.LogScanner`` does not run these regexes on every record.  It first finds the
records worth inspecting and only runs the regexes there:

* with Hyperscan, records where a family pattern (:mod:`runjob_health._families`) or one
  of :data:`STATE_PATTERNS` matched (prefilter mode: a superset); the scanner then runs
  only the labels of the families that matched;
* with the ``bytes.find`` fallback, records holding one of the literal :data:`ANCHORS`.
  That is only correct if **every match of every label pattern, and every record that
  changes scanner state while it is idle (traceback start, a ``Killed`` line, a completion
  row for the truncation check), contains at least one anchor occurrence that passes its
  guard**.  When you add a pattern, make sure its matched text contains one of the anchors
  below (case-sensitive!), or add an anchor; when you add a state pattern, add it to
  :data:`STATE_PATTERNS` too.

``tests/test_health_scan.py`` checks both on every fixture and on a list of example
strings, and compares the fast scanner with a per-record reference scanner.
"""

from __future__ import annotations

import re

from . import _families

# --------------------------------------------------------------------------
# vocabulary: label -> (severity, action, title, advice)
# --------------------------------------------------------------------------

LABELS: dict[str, tuple[str, str, str, str]] = {
    "cuda_oom": (
        "error", "stop", "GPU ran out of memory",
        "use more GPUs (or tensor/pipeline parallelism), a smaller micro-batch with more "
        "gradient accumulation, gradient checkpointing, or for vLLM a lower max_model_len / "
        "higher gpu_memory_utilization; runjob will not change any of these for you",
    ),
    "host_oom": (
        "error", "stop", "Host (CPU) memory exhausted, the process was OOM-killed",
        "request more host memory (--mem / --mem-per-cpu), use fewer DataLoader workers, load "
        "checkpoints shard by shard (low_cpu_mem_usage / device_map) or stream the dataset instead "
        "of loading it into RAM (a worker killed by signal 9 / exitcode -9, or a bare 'Killed', is "
        "the kernel's OOM killer, not the GPU)",
    ),
    "nan_loss": (
        "error", "stop", "Loss or gradient norm became NaN/Inf",
        "lower the learning rate (or add warmup), check the data for bad samples, "
        "prefer bf16 over fp16 and keep gradient clipping on; resume from the last good checkpoint",
    ),
    "time_limit": (
        "warning", "resume", "Job hit its scheduler time limit",
        "resume from the last checkpoint, and request a longer --time or checkpoint more often",
    ),
    "preempted": (
        "warning", "resume", "Job was preempted (spot/preemptible instance reclaimed, or pod evicted)",
        "resume from the last checkpoint; checkpoint more often than the provider's notice "
        "window allows, or use on-demand capacity for runs that cannot lose work",
    ),
    "node_fail": (
        "error", "resume", "A node, GPU or distributed worker died",
        "resume on other nodes (exclude the failed one) and report it to the admins; for a Ray "
        "node or actor that died, read that node's raylet log and dmesg first (an OOM kill or a "
        "preemption there looks the same from the driver)",
    ),
    "nccl_error": (
        "error", "retry", "NCCL / distributed communication failure",
        "retry the job; if it repeats check the network/IB settings, NCCL env vars, "
        "a hung rank, or raise the collective timeout",
    ),
    "disk_full": (
        "error", "stop", "Disk full or quota exceeded",
        "free space or point outputs/checkpoints/caches (HF_HOME, TMPDIR) at a larger "
        "filesystem, and keep fewer checkpoints",
    ),
    "hub_auth_error": (
        "error", "stop", "Hugging Face Hub refused access (401/403 or gated repo)",
        "set a valid HF_TOKEN (an access token: the Hub no longer accepts passwords) that can "
        "read the repo, and accept the model's license / request access on its Hub page",
    ),
    "submit_error": (
        "error", "stop", "The scheduler rejected the job submission",
        "fix the partition/account/QOS/time/node request in the job spec and submit again",
    ),
    "import_error": (
        "error", "stop", "A module or command is missing in the job environment",
        "install the missing package/command in the job's environment (or activate the "
        "right env/module) and resubmit",
    ),
    "traceback": (
        "error", "stop", "Uncaught Python exception",
        "fix the cause shown in the exception and resubmit",
    ),
    "truncation": (
        "warning", "stop", "Completions were cut off at max_tokens",
        "raise max_tokens (never silently reduce it) and re-run the affected rows",
    ),
}

# labels whose findings come in kinds, each with its own title and advice (and, where the
# evidence is weaker than the label's usual evidence, its own severity and action)
KINDS: dict[str, tuple] = {
    "rows": LABELS["truncation"][2:],
    "trainer": (
        "Trainer completions were clipped at the response length limit",
        "raise max_completion_length / max_response_length (max_new_tokens) so completions can end on "
        "their own; clipped completions carry a truncated reward signal. runjob will not change it for you",
    ),
    # half or more of the completions clipped in a quarter of the logged steps, never all of
    # them: the run still learns from the rest, so a note, not a stop
    "trainer_share": (
        "Many trainer completions were clipped at the response length limit",
        "the clipped completions end before their answer and get a truncated reward; consider a longer "
        "max_completion_length / max_response_length. runjob will not change it for you",
        "warning", "warn",
    ),
    "context": (
        "The eval harness truncated prompts to fit the context window",
        "raise the model's max length (max_model_len / max_length), or lower max_new_tokens or the "
        "few-shot count; runjob will not change any of these for you",
    ),
    # transformers warns once per tokenizer; the harness then cuts the prompt (lm-eval keeps
    # the last max_length tokens) or the model indexes past its positions.  A training run
    # that tokenizes whole documents and chunks them afterwards prints it harmlessly: a note
    "tokenizer": (
        "A tokenized input is longer than the model's maximum length",
        "in an eval the prompt gets cut (or the model fails on it): raise max_length / max_model_len or "
        "shorten the prompt; a training run that chunks texts after tokenizing can ignore this",
        "warning", "warn",
    ),
    "step": (
        "srun could not start a job step inside the allocation",
        "make the step's request fit the allocation (tasks, CPUs per task, memory, GPUs; an inherited "
        "SLURM_MEM_PER_CPU / SLURM_MEM_PER_NODE from the batch environment is a common cause) and resubmit",
    ),
}

#: Labels judged from how the job ended rather than matched by a log family (so outside the
#: corpus's per-label fixtures): the same (severity, action, title, advice).
VERDICTS: dict[str, tuple[str, str, str, str]] = {
    # A process killed by SIGKILL ("Killed" beside exit 137, or the scheduler's FAILED 137)
    # with no out-of-memory record in the log (no oom-kill event, no OUT_OF_MEMORY state, no
    # exceeded memory limit): a kill -9, not proof of an OOM. A retry: it resumes from the
    # newest checkpoint within resume.max_failures; an OOM record found as well wins (host_oom).
    "killed": (
        "error", "retry", "The job's process was killed with SIGKILL (kill -9) and nothing recorded an out-of-memory kill",
        "no oom-kill event and no OUT_OF_MEMORY state: someone or something (an admin, a watchdog, "
        "a cleanup script) killed it, and runjob resumes it from its newest checkpoint. If its memory peak "
        "was near the limit (sacct MaxRSS, dmesg on the node), it was the kernel's OOM killer after all: "
        "request more host memory",
    ),
}
ALL_LABELS = {**LABELS, **VERDICTS}

SPECIFIC_LABELS = tuple(k for k in LABELS if k not in ("traceback", "truncation"))

# label patterns: see _families (one family = one way a framework reports one failure)
FAMILIES = _families.FAMILIES
LABEL_PATTERNS = _families.LABEL_PATTERNS
FAMILY_PREFILTER = _families.PREFILTER

# --------------------------------------------------------------------------
# anchors (literal, case-sensitive).  GUARDED anchors only count when the
# next byte is not a word character (so "info", "nanosecond" do not trigger).
# --------------------------------------------------------------------------

ANCHORS: tuple[bytes, ...] = (
    # nan_loss values
    b"nan", b"NaN", b"NAN", b"inf", b"Inf",
    b"Current loss scale",
    # the "...Error" family: OutOfMemoryError, MemoryError, ImportError,
    # ModuleNotFoundError, GatedRepoError, NCCL error, ncclXxxError,
    # "sbatch: error:", "CUDA error: out of memory", "Client Error", ...
    # (guarded "Error": a class name ends there, so "Errors: 0" and "ErrorRate" do not count;
    # lowercase only with a colon or a known prefix: metric names like eval_error are common)
    b"Error", b"error:", b"cudaError", b"olog error", b"lient error",
    # cuda_oom
    b"CUDA out", b"HIP out", b"MPS backend out", b"THCudaCheck", b"_ALLOC_FAILED",
    b"CUDA_ERROR_OUT_OF_MEMORY", b"No available memory", b"KV cache", b"RESOURCE_EXHAUSTED",
    b"Free memory on", b"of memory. Try",
    # host_oom
    b"Detected", b"Killed", b"Out Of Memory", b"Out of memory", b"exceeded memory",
    b"Exceeded", b"Memory cgroup", b"DefaultCPUAllocator", b"exitcode", b"SIGKILL", b"return code",
    # time_limit / preempted / node_fail
    b"DUE TO", b"PBS: job killed", b"TERM_",
    # (few, short anchors: the bytes.find engine makes one pass per anchor)
    b"nterruption", b"going to be interrupted", b"reempt", b"imminent", b"ermination", b"instance-action",
    b'"action', b"low on resource", b"had condition", b"Evicted",
    b"NODE_FAIL", b"ode failure", b"ode Failure", b"Xid", b"ECC", b"fallen off the bus", b"GPU is lost",
    b"been marked", b"died", b"is dead", b"dump signal",
    b"Task launch", b"requeued", b"NodeDown", b"Kill task", b"Not responding", b"rebooted",
    b"complete failure", b"NHC",
    # nccl_error
    # (not plain "NCCL": NCCL_DEBUG=INFO logs have millions of "NCCL INFO" lines)
    b"Watchdog caught", b"NCCL error", b"NCCL Error", b"ProcessGroupNCCL", b"Some NCCL", b"NCCL communicator",
    b"NCCL WARN", b"DistBackend",
    # disk_full
    b"No space left", b"Errno", b"ENOSPC", b"isk quota", b"Not enough",
    # hub_auth_error
    b"Invalid ", b"Cannot access gated", b"You are trying",
    b"Access to model", b"Repo model", b"Repository Not Found", b"Unauthorized for url", b"TokenNotFound",
    b"uthentication",
    # submit_error
    b"Batch job submission", b"Unable to allocate", b"Unable to create",
    # import_error
    b"No module named", b"command not found", b"execve",
    b"undefined symbol", b"shared object", b"' not found", b"CUDA Setup", b"CUDA SETUP", b"CUDA binary",
    b"Failed to import",
    # state changes that are not label matches
    b"Traceback", b'File "',
    # truncation (completion rows, trainer metrics, harness notices)
    b"finish_reason", b"clipped_ratio", b"clip_ratio", b"terminated_length", b"runcat", b"Token indices",
)
# per label: at least one of these literals is in every record the label's
# patterns match (a cheap precheck before running the regexes)
LABEL_ANCHORS: dict[str, tuple[bytes, ...]] = {
    "cuda_oom": (b"CUDA out", b"HIP out", b"MPS backend out", b"Error", b"error:", b"cudaError", b"THCudaCheck", b"_ALLOC_FAILED",
                 b"CUDA_ERROR_OUT_OF_MEMORY", b"No available memory", b"KV cache", b"RESOURCE_EXHAUSTED",
                 b"Free memory on", b"Not enough", b"of memory. Try"),
    "host_oom": (b"Detected", b"Killed", b"Out Of Memory", b"exceeded memory", b"Exceeded", b"Out of memory",
                 b"Memory cgroup", b"DefaultCPUAllocator", b"Error", b"exitcode", b"SIGKILL", b"return code"),
    "nan_loss": (b"nan", b"NaN", b"NAN", b"inf", b"Inf", b"Current loss scale"),
    "time_limit": (b"DUE TO", b"PBS: job killed", b"TERM_"),
    "preempted": (b"DUE TO", b"TERM_", b"nterruption", b"going to be interrupted", b"reempt", b"imminent",
                  b"ermination", b"instance-action", b'"action', b"low on resource", b"had condition", b"Evicted"),
    "node_fail": (b"DUE TO", b"NODE_FAIL", b"ode failure", b"ode Failure", b"Xid", b"ECC", b"fallen off the bus",
                  b"GPU is lost", b"been marked", b"Error", b"cudaError", b"olog error", b"died", b"is dead", b"dump signal",
                  b"Task launch", b"requeued", b"NodeDown", b"Kill task", b"Not responding", b"rebooted",
                  b"complete failure", b"NHC"),
    "nccl_error": (b"Watchdog caught", b"NCCL error", b"NCCL Error", b"ProcessGroupNCCL", b"Some NCCL",
                   b"NCCL communicator", b"NCCL WARN", b"Error", b"DistBackend"),
    "disk_full": (b"No space left", b"Errno", b"ENOSPC", b"isk quota", b"Not enough"),
    "hub_auth_error": (b"Error", b"lient error", b"Invalid ", b"Cannot access gated", b"You are trying", b"Access to model", b"Repo model",
                       b"Repository Not Found", b"Unauthorized for url", b"TokenNotFound", b"uthentication"),
    "submit_error": (b"error:", b"Batch job submission", b"Unable to allocate", b"Unable to create"),
    "import_error": (b"Error", b"No module named", b"command not found", b"execve", b"undefined symbol",
                     b"shared object", b"' not found", b"CUDA Setup", b"CUDA SETUP", b"CUDA binary",
                     b"Failed to import"),
}

# only when max_tokens is given (token-count rows)
TOKEN_ANCHORS: tuple[bytes, ...] = (b"_tokens", b"output_len", b"gen_len")
GUARDED: frozenset[bytes] = frozenset({b"nan", b"NaN", b"NAN", b"inf", b"Inf", b"Error"})
GUARD_ALLOWED_SUFFIX = b"inity"  # "Infinity"/"infinity" pass the guard

# --------------------------------------------------------------------------
# traceback structure
# --------------------------------------------------------------------------

TB_HEADER = rb"Traceback \(most recent call last\)"
TB_FRAME = rb'File "[^"]*", line \d+'
# the final exception line (tested on the prefix-stripped, left-stripped text)
TB_EXC = (
    rb"^(?:[A-Za-z_]\w*\.)*(?=[A-Z])\w*(?:Error|Exception|Exit|Interrupt|Iteration|Failure|Fault|Warning)"
    rb"(?:\([\w.]+\))?(?::|$)"
)
TB_STRUCTURAL = (
    rb"^(?:$|[\xe2]\x94[\x82\x80\x9c\xa4\xac\xb4\xbc\x8c\x90\x94\x98]|\xe2\x95[\xad\xae\xaf\xb0]"
    rb"|During handling of the above exception|The above exception was the direct cause"
    rb"|\[Previous line repeated|[\^~\s]+$)"
)
# lines after the exception that mean the process is going down
TB_EXIT = (
    rb"exit(?:ed)?(?: with)?(?: exit)? (?:code|status)\s*:?\s*-?[1-9]"
    rb"|exitcode\s*:\s*-?[1-9]"
    rb"|non-zero exit (?:code|status)"
    rb"|core dumped|Segmentation fault|terminate called"
    rb"|Sending process \d+ closing signal"
    rb"|CANCELLED AT"
    rb"|Abnormal program exit"
    rb"|task \d+: (?:Exited|Killed|Terminated)"
    rb"|(?:^|\s)Killed\s*$"
)
# lines that look like normal progress / training logging (a run of digits is matched from its
# first digit, (?<!\d): else a long number is searched again from each of its digits)
TB_PROGRESS = (
    rb"(?<!\d)\d+%\||\|\s*\d+/\d+\s*\["
    rb"|\b(?:[Ee]poch|EPOCH|[Ss]tep|STEP|[Ii]ter|[Ii]teration|global_step)\b\W{0,3}\d"
    rb"|\b(?:loss|Loss|train_loss)\b['\"]?\s*[:=]\s*-?\d"
    rb"|\d\s*(?:it/s|s/it|samples/s|tokens/s|tok/s)\b"
)
TB_ERRORISH = rb"[Ee]rror|ERROR|Exception|Traceback|FAIL|[Ff]ailed|[Ff]atal|FATAL|CRITICAL|wandb:"

# "Killed" + exit-137 context (host OOM kill without a kernel/slurm message)
KILLED = rb"(?:^|[\s:])Killed(?=\s|$)"
EXIT137 = (
    rb"(?:code|status|exitcode|returncode)\W{0,3}(?:137|-9)\b"
    rb"|signal(?: number)?:? 9\b|SIGKILL|\bError 137\b"
)

# --------------------------------------------------------------------------
# truncation
# --------------------------------------------------------------------------

FINISH_REASON = rb"finish_reason['\"]?\s*[:=]\s*(?:<\w+\.\w+:\s*)?['\"]?([A-Za-z_]+)"
TRUNCATED_REASONS = frozenset({b"length", b"max_tokens", b"max_length"})
NULL_REASONS = frozenset({b"none", b"null"})
# trainer metrics that say completions were clipped at the length limit: TRL's GRPO/RLOO
# "completions/clipped_ratio" (share of completions without EOS), verl's
# "response_length/clip_ratio" (share of responses whose length equals max_response_length;
# newer verl prints values as np.float64(...)).  Not verl's "clip_ratio" config key (the PPO
# epsilon) nor "prompt_length/clip_ratio".
CLIPPED_RATIO = (rb"(?:clipped_ratio|response_length/clip_ratio)['\"]?\s*[:=]\s*['\"]?(?:np\.float\d+\()?"
                 rb"([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)")
#: a logged step with at least this share of completions clipped counts as a clipped step
CLIPPED_STEP_SHARE = 0.5
TERMINATED_LENGTH = rb"mean_terminated_length['\"]?\s*[:=]\s*['\"]?([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)"
# an eval harness saying it cut the prompt/context to fit (lighteval, lm-evaluation-harness)
CONTEXT_TRUNCATION = (
    rb"Truncating context to \d+ tokens"
    rb"|Left truncation applied\. Original sequence length was \d+"
    rb"|[Cc]ontext (?:was |has been )?truncated to (?:fit|\d+ tokens)"
    rb"|exceeds model's maximum length \(\d+\)\. Truncating \d+ tokens from the left"
)
# transformers' tokenizer (tokenization_utils_base, once per tokenizer)
TOKENIZER_OVERLENGTH = (rb"Token indices sequence length is longer than the specified maximum sequence length"
                        rb" for this model \((\d+) > (\d+)\)")
# records that change the scanner's state while it is idle (besides the label families)
STATE_PATTERNS: tuple[bytes, ...] = (
    TB_HEADER, TB_FRAME, KILLED, FINISH_REASON, CLIPPED_RATIO, TERMINATED_LENGTH, CONTEXT_TRUNCATION,
    TOKENIZER_OVERLENGTH,
)
TOKEN_COUNT = (
    rb"['\"]?\b(?:completion_tokens|output_tokens|num_output_tokens|num_generated_tokens"
    rb"|generated_tokens|output_len|gen_len)['\"]?\s*[:=]\s*(\d+)"
)


class LazyLabelPatterns(dict):
    """label -> compiled pattern, compiled on first use: a healthy log never needs most of
    them, and compiling all of them costs more start-up than scanning 100 MiB."""

    def __missing__(self, label: str) -> "re.Pattern[bytes]":
        rx = self[label] = re.compile(b"|".join(b"(?:" + p + b")" for p in LABEL_PATTERNS[label]))
        return rx


def compile_label_patterns() -> dict[str, "re.Pattern[bytes]"]:
    return LazyLabelPatterns()
