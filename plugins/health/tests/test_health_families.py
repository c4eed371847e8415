"""Health round 3: the rule families for failures reported in other words (issue 35).

Every positive here is a line a framework prints (its wording read from the framework's
source; the corpus in data/ has the same lines in real logs), every near miss a line real
healthy runs print.  Each case runs on both prefilter engines, whole and streamed byte by
byte, and on the per-record reference scanner."""

from __future__ import annotations

import pytest

from runjob_health._scan import LogScanner, _ReferenceScanner

from test_health_scan import run, run_chunked

ENGINES = ("python", "hyperscan")


def scan(text: str, *, engine: str = "python", max_tokens=None):
    return run(text.encode(), max_tokens=max_tokens, cls=lambda **kw: LogScanner(engine=engine, **kw))


def every_way(text: str, **kw) -> list:
    """Hits from both engines, the reference scanner and 1-byte streaming; they must agree."""
    data = text.encode()
    ways = [scan(text, engine=e, **kw) for e in ENGINES]
    ways.append(run(data, cls=_ReferenceScanner, **kw))
    ways.append(run_chunked(data, iter(lambda: 1, None), **kw))
    assert all(w == ways[0] for w in ways), ways
    return ways[0]


FAMILY_POSITIVES = [
    # (line, label, words of the evidence the finding must name)
    ("(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] ValueError: Free memory on device (3.22/4.0 GiB) "
     "on startup is less than desired GPU memory utilization (0.9, 3.6 GiB). Decrease GPU memory utilization or "
     "reduce GPU memory used by other processes.", "cuda_oom", "start-up memory check"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "cuda_oom",
     "start-up memory check"),
    ("RuntimeError: Decode out of memory. Try to lower your batch size.", "cuda_oom", "KV cache"),
    ("Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`", "cuda_oom",
     "start-up memory check"),
    ("RuntimeError: Not enough memory to handle 4096 prefill tokens.", "cuda_oom", "start-up memory check"),
    ("[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
     "'--local_rank=0'] exits with return code = -9", "host_oom", "SIGKILL"),
    ("subprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'main.py']' died with <Signals.SIGKILL: 9>.",
     "host_oom", "SIGKILL"),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL", "host_oom",
     "SIGKILL"),
    ("/opt/conda/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
     "_ZN3c104cuda9SetDeviceEi", "import_error", "native library"),
    ("OSError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by "
     "/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_python.so)", "import_error", "native library"),
    ("OSError: libcudart.so.12: cannot open shared object file: No such file or directory", "import_error",
     "native library"),
    ("        CUDA Setup failed despite GPU being available. Please run the following command to get more "
     "information:", "import_error", "native library"),
    ("RuntimeError: Failed to import transformers.models.llama.modeling_llama because of the following error "
     "(look up to see its traceback):", "import_error", "lazy-import wrapper"),
    ("srun: error: Unable to create step for job 29986033: Memory required by task is not available", "submit_error",
     "srun could not create a job step"),
    ("srun: error: Unable to create step for job 4359715: More processors requested than permitted", "submit_error",
     "srun could not create a job step"),
    ("srun: error: Task launch for StepId=123.0 failed on node gpu07: Communication connection failure", "node_fail",
     "node down"),
    ("       80520_36 n2        align.sh  PENDING         0:00      1 (launch failed requeued held)", "node_fail",
     "node down"),
    ("Kill task failed     root      2024-01-25T15:12:23 ip-10-0-1-23", "node_fail", "node down"),
    ("   Reason=Not responding [slurm@2024-03-01T10:00:00]", "node_fail", "node down"),
    ("node1:617:2799 [3] transport/net_ib.cc:2360 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<53393> with "
     "error 12, opcode 1, len 5222, vendor err 129", "nccl_error", "collective"),
]


@pytest.mark.parametrize("line,label,evidence", FAMILY_POSITIVES, ids=[f"{lb}-{i}" for i, (_, lb, _) in
                                                                       enumerate(FAMILY_POSITIVES)])
def test_family_positive_names_its_evidence(line, label, evidence):
    hits = every_way(line + "\n")
    assert [h.label for h in hits] == [label]
    assert "(evidence: " in hits[0].message and evidence in hits[0].message, hits[0].message
    assert hits[0].line == 1


def test_srun_step_failure_says_what_to_change():
    hits = scan("srun: error: Unable to create step for job 7: More processors requested than permitted\n")
    assert hits[0].message.startswith("srun could not start a job step inside the allocation at line 1")
    assert "SLURM_MEM_PER_CPU" in hits[0].message and (hits[0].severity, hits[0].action) == ("error", "stop")


NEAR_MISSES = [
    # SGLang retracts requests when its KV pool is full, and carries on
    "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845",
    # optional native extensions that fail to load and say so in a warning
    "/usr/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: "
    "/usr/lib/python3.10/site-packages/torchvision/image.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "2024-02-25 18:52:47.991396: W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic "
    "library 'libcudart.so.11.0'; dlerror: libcudart.so.11.0: cannot open shared object file: No such file or directory",
    "UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit "
    "multiplication, and GPU quantization are unavailable.",
    # srun waiting for resources, and a step refused because the job is already ending
    "srun: Job 29986033 step creation temporarily disabled, retrying (Requested nodes are busy)",
    "srun: error: Unable to create step for job 63094233: Job/step already completing or completed",
    # a pending job's reason while nodes drain, and scontrol's empty reason
    "  1234 gpu train.sh alice PD 0:00 1 (ReqNodeNotAvail, UnavailableNodes:d[001-032])",
    "   JobState=RUNNING Reason=None Dependency=(null)",
    # DeepSpeed's launcher reporting an ordinary failure, not a kill
    "[2024-03-20 20:31:29,269] [ERROR] [launch.py:321:sigkill_handler] ['python', '-u', 'train.py'] exits with "
    "return code = 1",
    # verl/PPO config and metrics that say "clip" without meaning truncation
    "actor_rollout_ref.actor.clip_ratio=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28",
    "step:12 - actor/pg_clipfrac:0.004 - prompt_length/clip_ratio:0.000 - response_length/clip_ratio:0.010",
    "{'loss': 0.06, 'clip_ratio/low_mean': 0.0, 'clip_ratio/region_mean': 0.0051, 'completions/clipped_ratio': 0.0}",
    # NCCL's proxy thread at a clean teardown, and config dumps
    "3a74:39:302 [0] proxy.cc:1111 NCCL WARN [Service thread] Unknown command 66326 from localRank -1",
    "  oom_score_adj: 0   oom_kill_disable: false   memory.max: 64G",
]


@pytest.mark.parametrize("line", NEAR_MISSES, ids=[f"near-miss-{i}" for i in range(len(NEAR_MISSES))])
def test_near_miss_stays_quiet(line):
    assert every_way(line + "\n") == []


def test_verl_clip_ratio_share_is_a_note_and_every_clipped_step_a_stop():
    verl = "step:%d - actor/pg_loss:0.01 - response_length/mean:3000.0 - response_length/clip_ratio:%s - x:1\n"
    # half or more of the responses clipped in 12 of 40 steps (30%): a note, the run goes on
    log = "".join(verl % (i, "0.625" if i % 10 < 3 else "0.100") for i in range(40))
    hits = every_way(log)
    assert [(h.label, h.severity, h.action) for h in hits] == [("truncation", "warning", "warn")]
    # decided while streaming, as soon as 20 steps show the share (6 of the first 20)
    assert "6 of 20 logged steps (30.0%)" in hits[0].message and "so far" in hits[0].message
    assert "response_length/clip_ratio" in hits[0].message
    # a few clipped steps, or a steady 30% clipped: quiet
    assert every_way("".join(verl % (i, "0.625" if i < 3 else "0.1") for i in range(40))) == []
    assert every_way("".join(verl % (i, "0.3") for i in range(40))) == []
    # every response clipped in every step: the stop it always was
    hits = every_way("".join(verl % (i, "1.0") for i in range(5)))
    assert [(h.label, h.action) for h in hits] == [("truncation", "stop")]
    # newer verl prints numpy scalars
    hits = every_way("".join("step:%d - response_length/clip_ratio:np.float64(1.0)\n" % i for i in range(3)))
    assert [h.label for h in hits] == ["truncation"]


def test_tokenizer_over_length_warning_is_one_note_per_run():
    line = ("Token indices sequence length is longer than the specified maximum sequence length for this model "
            "(7614 > 2048). Running this sequence through the model will result in indexing errors\n")
    hits = every_way(line + "Running loglikelihood requests\n" + line)
    assert [(h.label, h.severity, h.action, h.line) for h in hits] == [("truncation", "warning", "warn", 1)]
    assert "7614 > 2048 tokens" in hits[0].message and "transformers' tokenizer" in hits[0].message


def test_lm_eval_left_truncation_is_a_context_finding():
    line = ("WARNING:lm_eval.models.huggingface:Combined length of context (1108) and continuation (1) exceeds "
            "model's maximum length (128). Truncating 982 tokens from the left.\n")
    hits = every_way(line * 3)
    assert [(h.label, h.line) for h in hits] == [("truncation", 1)]
    assert hits[0].message.startswith("The eval harness truncated prompts to fit the context window")


def test_nccl_warn_alone_after_a_clean_end_is_quiet_but_a_failure_wording_is_not():
    clean = "epoch 5 loss 0.01\nend: 05:19:29\nhost:39:302 [0] proxy.cc:1111 NCCL WARN [Service thread] Unknown command\n"
    assert every_way(clean) == []
    assert [h.label for h in every_way("host:1:2 [0] include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'\n")
            ] == ["nccl_error"]
