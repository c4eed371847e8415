"""Tests for the streaming log health checks (runjob_health._scan)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from runjob_health import _engine
from runjob_health import _patterns as P
from runjob_health._scan import (
    BURST_LINES,
    LOOKAHEAD_LINES,
    Hit,
    LogScanner,
    _ReferenceScanner,
    findings_for_state,
    scan_file,
)

DATA = Path(__file__).parent / "data" / "logs"
INDEX = json.loads((DATA / "index.json").read_text())
SEVERITIES = {"error", "warning", "info"}
ACTIONS = {"stop", "resume", "retry", "warn", "continue"}


def run(data: bytes | str, *, max_tokens=None, start_line=0, cls=LogScanner) -> list[Hit]:
    if isinstance(data, str):
        data = data.encode()
    s = cls(max_tokens=max_tokens, start_line=start_line)
    return s.feed(data) + s.finish()


def labels(hits) -> set[str]:
    return {h.label for h in hits}


def run_chunked(data: bytes, sizes, *, max_tokens=None, cls=LogScanner) -> list[Hit]:
    s = cls(max_tokens=max_tokens)
    out: list[Hit] = []
    pos = 0
    it = iter(sizes)
    while pos < len(data):
        n = next(it)
        out += s.feed(data[pos:pos + n])
        pos += n
    return out + s.finish()


def quiet(log: str, **kw) -> bool:
    """No hits from the fast scanner, the reference scanner, nor 1-byte streaming."""
    data = log.encode()
    return (run(data, **kw) == [] and run(data, cls=_ReferenceScanner, **kw) == []
            and run_chunked(data, iter(lambda: 1, None), **kw) == [])


# --------------------------------------------------------------------------- fixtures

def test_fixture_index_is_complete():
    assert len(INDEX) >= 60
    per = Counter(e["file"].split("/")[0] for e in INDEX)
    for label in P.LABELS:
        assert per[label] >= 4, (label, per[label])
    assert per["healthy"] >= 15
    files = {str(p.relative_to(DATA)) for p in DATA.rglob("*.log")}
    assert files == {e["file"] for e in INDEX}
    for e in INDEX:
        assert set(e) >= {"file", "labels", "source", "note"}
        assert set(e["labels"]) <= set(P.LABELS)
        folder = e["file"].split("/")[0]
        assert (folder == "healthy") == (e["labels"] == [])
        if folder != "healthy":
            assert folder in e["labels"]
        assert e["source"].startswith("https://") or e["source"].startswith("generated"), e
        if e["source"].startswith("generated"):
            assert folder in ("truncation", "healthy") and "generated" in e["note"]
        n = len((DATA / e["file"]).read_bytes().splitlines())
        assert 1 <= n <= 80, (e["file"], n)


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_fixture_yields_exactly_its_labels(entry):
    data = (DATA / entry["file"]).read_bytes()
    hits = run(data, max_tokens=entry.get("max_tokens"))
    assert labels(hits) == set(entry["labels"]), [(h.line, h.label, h.text[:80]) for h in hits]
    # one physical event -> one hit per label
    counts = Counter(h.label for h in hits)
    assert all(c == 1 for c in counts.values()), counts
    for h in hits:
        assert h.severity in SEVERITIES and h.action in ACTIONS
        assert 1 <= h.line <= len(data.splitlines()) + 1
        assert "\n" not in h.message and len(h.text) <= 300 and h.text == h.text.strip()


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_fixture_fast_scanner_equals_reference(entry):
    data = (DATA / entry["file"]).read_bytes()
    mt = entry.get("max_tokens")
    assert run(data, max_tokens=mt) == run(data, max_tokens=mt, cls=_ReferenceScanner)


@pytest.mark.parametrize("size", [1, 7, 64 * 1024])
def test_fixtures_streamed_in_chunks_give_identical_hits(size):
    for e in INDEX:
        data = (DATA / e["file"]).read_bytes()
        mt = e.get("max_tokens")
        whole = run(data, max_tokens=mt)
        assert run_chunked(data, iter(lambda: size, None), max_tokens=mt) == whole, e["file"]


def test_caught_traceback_fixture_is_a_warning():
    hits = run((DATA / "traceback/wandb_retryerror_caught_then_epochs.log").read_bytes())
    assert [(h.label, h.severity, h.action) for h in hits] == [("traceback", "warning", "continue")]
    assert "RetryError" in hits[0].message


# --------------------------------------------------------------------------- synthetic log

def synthetic_log(seed: int, n_lines: int = 40000) -> bytes:
    r = random.Random(seed)
    out = []
    for i in range(n_lines):
        k = r.random()
        if k < 0.3:
            out.append("{'loss': %.4f, 'grad_norm': %.3f, 'learning_rate': 2e-05, 'epoch': %.2f}\n" % (r.uniform(0.5, 2), r.uniform(0.1, 3), i / 1e4))
        elif k < 0.5:
            out.append("\r%3d%%|%s| %d/40000 [00:%02d<01:00, %.2fit/s]" % (i % 100, "#" * (i % 10), i, i % 60, r.uniform(1, 3)))
        elif k < 0.7:
            out.append("step %d | loss %.4f | info: inference throughput %d tok/s\n" % (i, r.uniform(0.5, 2), r.randint(100, 900)))
        elif k < 0.85:
            out.append("2024-05-01 12:00:%02d INFO trainer: saving checkpoint-%d (nanosecond timer ok)\n" % (i % 60, i))
        else:
            out.append("[rank%d]: NCCL INFO Channel %02d : 0 1 2 3\n" % (i % 8, i % 24))
        if i == 5000:
            out.append("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n    f()\n"
                       "ConnectionError: reset by peer\n")
        if i == 9000:
            out.append("/var/spool/slurmd/job1/slurm_script: line 9: 1234 Killed python train.py\n")
            out.append("srun: error: n1: task 0: Exited with exit code 137\n")
        if i == 15000:
            out.append("{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 1.5}\n")
        if 20000 <= i < 20030:
            out.append('{"idx": %d, "finish_reason": "%s", "completion_tokens": %d}\n' % (i, "length" if i % 7 == 0 else "stop", 256))
        if i == 30000:
            out.append("[rank3]:[E1023 04:14:29.22 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout\n" * 4)
    out.append("Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    return "".join(out).encode()


@pytest.fixture(scope="module")
def synth() -> bytes:
    return synthetic_log(1)


def test_synthetic_log_expected_events(synth):
    hits = run(synth, max_tokens=256)
    got = [(h.label, h.severity) for h in hits]
    assert got == [
        ("traceback", "warning"),     # caught: followed by progress
        ("killed", "error"),          # Killed + exit 137, no OOM record: a kill -9
        ("nan_loss", "error"),
        ("truncation", "warning"),
        ("nccl_error", "error"),
        ("cuda_oom", "error"),        # the OOM traceback gives cuda_oom, not traceback
    ], [(h.line, h.label, h.text[:60]) for h in hits]


def test_synthetic_log_fast_equals_reference_and_chunking(synth):
    ref = run(synth, max_tokens=256, cls=_ReferenceScanner)
    assert run(synth, max_tokens=256) == ref
    r = random.Random(3)
    assert run_chunked(synth, iter(lambda: r.choice([1, 2, 7, 13, 100, 4096, 65536, 300000]), None), max_tokens=256) == ref
    assert run_chunked(synth, iter(lambda: 7, None), max_tokens=256) == ref
    assert run_chunked(synth, iter(lambda: 64 * 1024, None), max_tokens=256) == ref
    assert run_chunked(synth, iter(lambda: 1, None), max_tokens=256, cls=_ReferenceScanner) == ref


@pytest.mark.parametrize("mode", ["all_fast", "all_rare"])
def test_search_plan_does_not_change_results(synth, mode):
    ref = run(synth, max_tokens=256, cls=_ReferenceScanner)
    s = LogScanner(max_tokens=256, engine="python")    # the plan belongs to the bytes.find engine
    if mode == "all_fast":
        s._finder.plan = (s._anchors, ())
    else:
        groups = {}
        for a in s._anchors:
            groups.setdefault(bytes(a[:1]), {}).setdefault(0, []).append(a)
        s._finder.plan = ([], [(b, [(o, tuple(g)) for o, g in offs.items()]) for b, offs in groups.items()])
    s._finder.plan_age = -(1 << 40)
    try:
        assert s.feed(synth) + s.finish() == ref
    finally:
        _engine._PLAN_CACHE.clear()   # the plan is shared per process; do not leave this one behind


def test_scan_file_and_small_chunk_size(tmp_path, synth):
    p = tmp_path / "run.log"
    p.write_bytes(synth)
    ref = run(synth, max_tokens=256)
    assert scan_file(p, max_tokens=256) == ref
    assert scan_file(p, max_tokens=256, chunk_size=4099) == ref


@pytest.mark.parametrize("engine", ["python", "hyperscan"])
def test_anchor_contract_holds_on_every_fixture_record(engine):
    """Every record a check reacts to must contain an anchor (the fast path relies on it)."""
    if engine == "hyperscan":
        pytest.importorskip("hyperscan")
    rxs = [re.compile(b"|".join(b"(?:" + p + b")" for p in pats)) for pats in P.LABEL_PATTERNS.values()]
    state = [re.compile(P.TB_HEADER), re.compile(P.TB_FRAME), re.compile(P.KILLED), re.compile(P.FINISH_REASON),
             re.compile(P.TOKEN_COUNT), re.compile(P.CLIPPED_RATIO), re.compile(P.TERMINATED_LENGTH),
             re.compile(P.CONTEXT_TRUNCATION), re.compile(P.TOKENIZER_OVERLENGTH)]
    assert set(P.STATE_PATTERNS) | {P.TOKEN_COUNT} == {rx.pattern for rx in state}
    s = LogScanner(max_tokens=10, engine=engine)
    checked = 0
    extra = [ln.encode() for ln, _ in POSITIVE]
    for rec in [r for e in INDEX for r in re.split(rb"[\r\n]", (DATA / e["file"]).read_bytes())] + extra:
        if any(rx.search(rec) for rx in rxs + state):
            checked += 1
            assert s._candidates(rec + b"\n", 0, len(rec) + 1), rec
    assert checked > 150


def test_label_anchor_precheck_is_sound():
    """_record only runs a label's regex when one of LABEL_ANCHORS[label] is present."""
    recs = [r for e in INDEX for r in re.split(rb"[\r\n]", (DATA / e["file"]).read_bytes())]
    recs += [ln.encode() for ln, _ in POSITIVE]
    assert set(P.LABEL_ANCHORS) == set(P.LABEL_PATTERNS)
    n = 0
    for label, pats in P.LABEL_PATTERNS.items():
        for p in pats:
            rx = re.compile(p)
            for rec in recs:
                if rx.search(rec):
                    n += 1
                    assert any(a in rec for a in P.LABEL_ANCHORS[label]), (label, p, rec)
        # every label anchor is also a prefilter anchor
        assert set(P.LABEL_ANCHORS[label]) <= set(P.ANCHORS), label
    assert n > 100


# --------------------------------------------------------------------------- positives

POSITIVE = [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "cuda_oom"),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory.", "cuda_oom"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`", "cuda_oom"),
    ("The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (4096).", "cuda_oom"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "cuda_oom"),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.batch.", "host_oom"),
    ("srun: error: gpu001: task 0: Out Of Memory", "host_oom"),
    ("slurmstepd: error: Job 7 exceeded memory limit (40 > 32), being killed", "host_oom"),
    ("{'loss': nan, 'learning_rate': 1e-05, 'epoch': 0.3}", "nan_loss"),
    ("{\"loss\": NaN, \"step\": 12}", "nan_loss"),
    ("step 10 | grad_norm: inf | lr 3e-4", "nan_loss"),
    ("Epoch 3: 50%|#####     | 5/10 [00:05<00:05, loss=inf, v_num=1]", "nan_loss"),
    ("Epoch 3: 50%|#####     | 5/10 [00:05<00:05, loss=nan, v_num=1]", "nan_loss"),
    ("step:12 - actor/pg_loss:nan - actor/entropy:0.41", "nan_loss"),
    ("train loss: tensor(nan, device='cuda:0', grad_fn=<NllLossBackward0>)", "nan_loss"),
    ("{'train_loss': inf, 'epoch': 1.0}", "nan_loss"),
    ("slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***", "time_limit"),
    ("slurmstepd: error: *** JOB 123 ON node1 CANCELLED AT 2024-01-01T00:00:00 DUE TO PREEMPTION ***", "preempted"),
    ("Spot instance interruption notice received, terminating in 2 minutes", "preempted"),
    ("srun: error: Node failure on node17", "node_fail"),
    ("job state NODE_FAIL", "node_fail"),
    ("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "node_fail"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "node_fail"),
    ("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)", "nccl_error"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error", "nccl_error"),
    ("ncclInternalError: Internal check failed.", "nccl_error"),
    ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed", "nccl_error"),
    ("OSError: [Errno 28] No space left on device", "disk_full"),
    ("cp: error writing 'ckpt.pt': Disk quota exceeded", "disk_full"),
    ("requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://huggingface.co/x", "hub_auth_error"),
    ("Invalid user token. If you didn't pass a user token, make sure you are properly logged in", "hub_auth_error"),
    ("huggingface_hub.errors.GatedRepoError: 403 Client Error.", "hub_auth_error"),
    ("Access to model meta-llama/Llama-2-7b-hf is restricted. You must be authenticated to access it.", "hub_auth_error"),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", "submit_error"),
    ("sbatch: error: Batch job submission failed: Invalid qos specification", "submit_error"),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", "submit_error"),
    ("ModuleNotFoundError: No module named 'flash_attn'", "import_error"),
    ("ImportError: cannot import name 'SFTConfig' from 'trl'", "import_error"),
    ("run.sh: line 4: torchrun: command not found", "import_error"),
    # issue 17: what real jobs print
    ("E0325 20:57:27.620000 2606 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
     "local_rank: 5 (pid: 2630) of binary: /usr/bin/python", "host_oom"),
    ("traceback : Signal 9 (SIGKILL) received by PID 14750", "host_oom"),
    ("Loading checkpoint shards:  38%|###8      | 3/8 [00:02<00:03,  1.28it/s]Killed", "host_oom"),
    ("The node with node id: 75b2 and ip: 10.4.4.107 has been marked dead because the detector has missed too many "
     "heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.)", "node_fail"),
    ("Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1. This can happen if "
     "the node was preempted, had a hardware failure, or its raylet crashed unexpectedly.", "node_fail"),
    ("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.", "node_fail"),
    ("(raylet) A worker died or was killed while executing a task by an unexpected system error.", "node_fail"),
    ("[rank0]:[W] [PG ID 0 Rank 0] Received a dump signal due to a collective timeout from  rank 13 and we will try",
     "node_fail"),
    ("2024/12/17 16:03:58 GCP Metadata Service says termination is imminent", "preempted"),
    ("curl http://metadata.google.internal/computeMetadata/v1/instance/preempted -H Metadata-Flavor:Google => TRUE",
     "preempted"),
    ('{"level":"warn","message":"Spot interruption payload received: {\\"action\\":\\"terminate\\",'
     '\\"time\\":\\"2025-03-31T16:34:24Z\\"}"}', "preempted"),
    ('{"DocumentIncarnation":3,"Events":[{"EventId":"A1","EventType":"Preempt","ResourceType":"VirtualMachine"}]}',
     "preempted"),
    ("Message:        The node was low on resource: memory.", "preempted"),
    ("Reason:         Evicted", "preempted"),
    ("Warning  Evicted  4m  kubelet  The node had condition: [DiskPressure].", "preempted"),
    ("Pod was terminated in response to imminent node shutdown.", "preempted"),
    ("slurmstepd: error: *** JOB 88 ON gpu3 CANCELLED AT 2025-01-01T00:00:00 DUE TO PREEMPTION ***", "preempted"),
    ("httpx.HTTPStatusError: Client error '401 Unauthorized' for url 'https://huggingface.co/api/models/google/x'",
     "hub_auth_error"),
    ("huggingface_hub.errors.HfHubHTTPError: 401 Client Error: Unauthorized. Invalid username or password.",
     "hub_auth_error"),
    ("Client error '403 Forbidden' for url 'https://huggingface.co/api/models/meta-llama/Llama-3.1-8B/revision/main'",
     "hub_auth_error"),
]


@pytest.mark.parametrize("line,label", POSITIVE, ids=[f"{lb}-{i}" for i, (_, lb) in enumerate(POSITIVE)])
def test_single_line_positive(line, label):
    hits = run(line + "\n")
    assert labels(hits) == {label}
    assert hits[0].line == 1 and hits[0].text == line[:300]


def test_kernel_killed_worker_messages_name_host_memory():
    h = run("Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]Killed\n")[0]
    assert (h.label, h.severity, h.action) == ("host_oom", "error", "stop")
    for word in ("host memory", "shard by shard", "exitcode -9", "not the GPU"):
        assert word in h.message


def test_ray_heartbeat_is_node_fail_not_oom_nor_preempted():
    line = ("The node with node id: 1 and address: 10.0.0.1 has been marked dead because the detector has missed too "
            "many heartbeats from it. This can happen when a (1) raylet crashes unexpectedly (OOM, preempted node, etc.)\n")
    hits = run(line)
    assert [(h.label, h.action) for h in hits] == [("node_fail", "resume")]
    assert "raylet log" in hits[0].message


def test_preemption_message_says_resume():
    h = run("Pod was terminated in response to imminent node shutdown.\n")[0]
    assert (h.label, h.severity, h.action) == ("preempted", "warning", "resume")
    assert "checkpoint" in h.message


def test_hub_auth_message_says_token_not_password():
    h = run("remote: Invalid username or password.\n")[0]
    assert h.label == "hub_auth_error" and "HF_TOKEN" in h.message and "no longer accepts passwords" in h.message


def test_killed_with_exit_137_context_is_a_kill_unless_an_oom_record_says_otherwise():
    # Before: host_oom ("add memory") for a plain kill -9, and its 'stop' refused the resume.
    log = "step 10 | loss 1.2\n/job.sh: line 3: 99 Killed python train.py\nsrun: error: n1: task 0: Exited with exit code 137\n"
    hits = run(log)
    assert [(h.label, h.line, h.action) for h in hits] == [("killed", 2, "retry")]
    assert "no oom-kill event" in hits[0].message and "GPU" not in hits[0].message
    assert labels(run("Killed\nprocess exited with code 137\n")) == {"killed"}
    # slurmstepd's cgroup OOM record, before or after the Killed line, makes it host_oom alone
    oom = "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.\n"
    assert labels(run(log + oom)) == {"host_oom"}
    assert labels(run(oom + log)) == {"host_oom"}
    # a bare "Killed" with no 137/SIGKILL context is not enough
    assert run("step 1\nKilled\nstep 2\n") == []
    # 137 context too far away does not count
    assert run("Killed\n" + "step x\n" * 30 + "exit code 137\n") == []


def test_cuda_oom_message_suggests_but_changes_nothing():
    h = run("torch.OutOfMemoryError: CUDA out of memory.\n")[0]
    assert (h.severity, h.action) == ("error", "stop")
    for word in ("GPU", "micro-batch", "accumulation", "max_model_len", "will not change"):
        assert word in h.message


def test_nan_message_suggests_lr_data_bf16():
    h = run("{'loss': nan}\n")[0]
    for word in ("learning rate", "data", "bf16"):
        assert word in h.message


# --------------------------------------------------------------------------- near misses

def test_near_miss_nan_inside_words():
    log = ("timer resolution: 1 nanosecond\nloading dataset from Nanjing mirror\nmodel: gpt-nano loss: 1.23\n"
           "loss: nanoseconds_per_step=12\nbanana loss: 0.5\n")
    assert quiet(log)


def test_near_miss_inf_in_info_and_inference():
    log = ("INFO 05-01 12:00:00 engine: inference started\n[info] loss_info: ok, grad_norm: 1.2\n"
           "infinite loop guard enabled, loss: 0.3\nINFO: Infinity-free run, loss=0.91\n")
    assert quiet(log)


def test_near_miss_error_in_config_keys():
    log = "config: {'error_score': 'raise', 'on_error': 'skip'}\nerror_score=raise\non_error: skip\nerrors_seen: 0\n"
    assert quiet(log)


def test_near_miss_max_tokens_in_config_dump():
    log = "SamplingParams(n=1, temperature=0.7, max_tokens=512, stop=[])\nmax_tokens: 512\n{\"max_tokens\": 512, \"max_new_tokens\": 512}\n"
    assert quiet(log) and quiet(log, max_tokens=512)


def test_near_miss_loss_exactly_zero():
    log = "{'loss': 0.0, 'grad_norm': 0.0, 'epoch': 1.0}\nloss=0.0\nstep 5 | loss 0.0000\n"
    assert quiet(log)


def test_near_miss_checking_for_nan_inf_with_finite_numbers():
    log = "checking for nan/inf in gradients ... ok\nnan/inf check passed: loss=0.4312 grad_norm=1.02\ndetect_anomaly: no NaN/Inf found\n"
    assert quiet(log)


def test_near_miss_nccl_info_lines():
    log = ("node1:123:456 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
           "node1:123:456 [0] NCCL INFO NET/IB : No device found.\n"
           "node1:123:456 [0] NCCL INFO comm 0x55 rank 0 nranks 8 - Init COMPLETE\n"
           "node1:123:456 [0] NCCL INFO Call to connect returned Connection refused, retrying\n")
    assert quiet(log)
    # but a real NCCL failure still fires
    assert labels(run(log + "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1\n")) == {"nccl_error"}


def test_near_miss_finish_reason_stop():
    rows = "".join('{"idx": %d, "finish_reason": "stop", "completion_tokens": 120}\n' % i for i in range(50))
    assert quiet(rows) and quiet(rows, max_tokens=512)


def test_near_miss_kill_and_node_wording():
    log = ("Killed 0 processes\ncleanup: Killed 0 stale workers, exit code 0\n"
           "(autoscaler +38s) Adding 1 nodes of type gpu.medium.\nnode added: 10.0.0.7 (ray.worker.gpu)\n"
           "Healthy:\n 1 head-group\n 2 default-worker\nRecent failures:\n (no failures)\n"
           "Sending process 4041 closing signal SIGTERM\nworker exited with exitcode: 0\n"
           "retrying in 9 s (attempt 9)\n")
    assert quiet(log)


def test_near_miss_cloud_and_k8s_wording():
    log = ("polling for termination-time\nscheduling: preemptible: true, provisioningModel: SPOT\n"
           "instance/preempted FALSE\nLRU cache: Evicted 3 entries\nkv-cache: evicted 12 blocks\n"
           'metrics: {"action": "continue", "time": 3}\nUse preemption-aware checkpointing (see docs)\n'
           "node_pool: spot=true, on_preemption=requeue\n")
    assert quiet(log)


def test_near_miss_hub_and_auth_wording():
    log = ("Token is valid (permission: read).\nLogin successful\nhuggingface_hub: using token from HF_TOKEN\n"
           "git-credential: Authentication succeeded for https://huggingface.co\n"
           "GET https://huggingface.co/api/models/gpt2 200 OK\n")
    assert quiet(log)


def test_near_miss_truncation_wording():
    log = ("tokenizer: truncation=True, max_length=2048\nUsing truncation_side='left'\n"
           "{'completions/clipped_ratio': 0.0, 'completions/mean_terminated_length': 412.5}\n"
           "{'completions/clipped_ratio': 0.25, 'completions/mean_terminated_length': 380.0}\n")
    assert quiet(log)


def test_near_miss_no_space_in_prose():
    log = "No space between tokens is allowed in this template\ntokenizer: No spaces were stripped\n"
    assert quiet(log)


def test_near_miss_caught_traceback_is_only_a_warning():
    log = (
        "step 99 | loss 1.02\n"
        "WARNING: upload failed, will retry\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/requests/adapters.py", line 501, in send\n'
        "    raise ConnectionError(err, request=request)\n"
        "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected())\n"
        + "".join("step %d | loss %.3f | 1.2it/s\n" % (100 + i, 1.0 - i / 100) for i in range(25))
    )
    hits = run(log)
    assert [(h.label, h.severity, h.action, h.line) for h in hits] == [("traceback", "warning", "continue", 6)]
    # and it is decided without waiting for finish(): after LOOKAHEAD_LINES progress lines
    s = LogScanner()
    assert [h.severity for h in s.feed(log.encode())] == ["warning"]


# --------------------------------------------------------------------------- traceback decisions

TB = ("Traceback (most recent call last):\n"
      '  File "train.py", line 10, in <module>\n'
      "    main()\n"
      '  File "train.py", line 7, in main\n'
      "    raise KeyError('labels')\n"
      "KeyError: 'labels'\n")


def test_uncaught_traceback_at_end_of_stream_is_error():
    s = LogScanner()
    assert s.feed(("step 1 | loss 2.0\n" + TB).encode()) == []          # pending
    hits = s.finish()
    assert [(h.label, h.severity, h.action, h.line) for h in hits] == [("traceback", "error", "stop", 7)]
    assert "KeyError: 'labels'" in hits[0].message and hits[0].text == "KeyError: 'labels'"


def test_traceback_followed_by_shutdown_noise_is_error():
    noise = ("wandb: Waiting for W&B process to finish... (failed 1).\nwandb: Run history:\nwandb:  train/loss 2.1\n"
             "Exception ignored in atexit callback\n" * 1 + "\n" * 3)
    assert [(h.label, h.severity) for h in run(TB + noise)] == [("traceback", "error")]


def test_traceback_followed_by_exit_line_is_decided_immediately():
    s = LogScanner()
    hits = s.feed((TB + "srun: error: node1: task 0: Exited with exit code 1\n").encode())
    assert [(h.label, h.severity) for h in hits] == [("traceback", "error")]
    assert s.finish() == []


def test_traceback_decided_after_lookahead_without_finish():
    s = LogScanner()
    out = s.feed((TB + "".join("teardown message %d\n" % i for i in range(LOOKAHEAD_LINES))).encode())
    assert [(h.label, h.severity) for h in out] == [("traceback", "error")]


def test_long_multirank_traceback_gives_one_hit():
    frames = "".join('[rank%d]:   File "m.py", line %d, in f\n[rank%d]:     g()\n' % (r, i, r) for r in range(2) for i in range(30))
    log = ("[rank0]: Traceback (most recent call last):\n[rank1]: Traceback (most recent call last):\n" + frames
           + "[rank0]: RuntimeError: shape mismatch\n[rank1]: RuntimeError: shape mismatch\n")
    hits = run(log)
    assert [(h.label, h.severity) for h in hits] == [("traceback", "error")]
    assert hits[0].text == "RuntimeError: shape mismatch"


def test_cuda_oom_traceback_gives_cuda_oom_not_traceback():
    log = TB.replace("KeyError: 'labels'", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB")
    hits = run(log + "E1 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0\n")
    assert [(h.label, h.severity, h.line) for h in hits] == [("cuda_oom", "error", 6)]


def test_caught_cuda_oom_is_downgraded():
    log = TB.replace("KeyError: 'labels'", "torch.OutOfMemoryError: CUDA out of memory.") + \
        "".join("{'loss': 1.%02d, 'epoch': 0.%02d}\n" % (i, i) for i in range(25))
    hits = run(log)
    assert [(h.label, h.severity, h.action) for h in hits] == [("cuda_oom", "warning", "continue")]


def test_torchrun_childfailed_after_child_error_is_explained():
    log = ("[rank0]: Traceback (most recent call last):\n[rank0]:   File \"t.py\", line 1, in <module>\n"
           "[rank0]: ModuleNotFoundError: No module named 'deepspeed'\n"
           "E1 api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 1) of binary: python\n" + TB.replace(
               "KeyError: 'labels'", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"))
    assert [h.label for h in run(log)] == ["import_error"]


# --------------------------------------------------------------------------- dedupe / bookkeeping

def test_same_label_in_a_burst_reports_once_and_again_later():
    nan = "{'loss': nan}\n"
    ok = "{'loss': 1.0}\n"
    assert [h.line for h in run(nan + ok * 10 + nan)] == [1]
    log = nan + ok * (BURST_LINES + 50) + nan
    assert [h.line for h in run(log)] == [1, BURST_LINES + 52]


def test_start_line_offsets_line_numbers_and_lines_seen():
    s = LogScanner(start_line=1000)
    hits = s.feed(b"step 1\nOSError: [Errno 28] No space left on device\npartial")
    assert [(h.label, h.line) for h in hits] == [("disk_full", 1002)]
    assert s.lines_seen == 1002
    s.finish()
    assert s.lines_seen == 1003


def test_carriage_return_progress_records_and_crlf():
    log = b"\r 10%|#| 1/10 [loss=1.2]\r 20%|#| 2/10 [loss=nan]\r 30%|#| 3/10\r\nnext line\r\n"
    hits = run(log)
    assert [(h.label, h.line) for h in hits] == [("nan_loss", 1)]
    assert "loss=nan" in hits[0].text and "\r" not in hits[0].text
    assert run_chunked(log, iter(lambda: 1, None)) == hits


def test_text_is_truncated_to_300_chars_around_the_match():
    line = "x" * 1000 + " OSError: [Errno 28] No space left on device " + "y" * 1000
    h = run(line + "\n")[0]
    assert len(h.text) == 300 and "No space left" in h.text


def test_feed_after_finish_raises():
    s = LogScanner()
    s.finish()
    with pytest.raises(RuntimeError):
        s.feed(b"x\n")


# --------------------------------------------------------------------------- truncation

def rows(n, n_len, key="finish_reason", fmt='{"i": %d, "%s": "%s"}\n'):
    return "".join(fmt % (i, key, "length" if i < n_len else "stop") for i in range(n))


def test_truncation_reports_once_with_share():
    hits = run(rows(40, 6))
    assert [(h.label, h.severity, h.action) for h in hits] == [("truncation", "warning", "stop")]
    assert "6 of 40" in hits[0].message or "of 2" in hits[0].message
    assert "raise max_tokens" in hits[0].message


def test_truncation_threshold_exactly_five_percent_of_twenty():
    assert labels(run(rows(20, 1))) == {"truncation"}     # 1/20 = 5%, decided at finish
    assert run(rows(19, 1)) == []                         # fewer than 20 completions
    assert run(rows(21, 1)) == []                         # 4.8%


def test_truncation_from_output_token_counts_needs_max_tokens():
    log = "".join('{"id": %d, "output_tokens": %d}\n' % (i, 512 if i % 5 == 0 else 100) for i in range(40))
    assert run(log) == []
    hits = run(log, max_tokens=512)
    assert labels(hits) == {"truncation"} and "max_tokens=512" in hits[0].message


def test_truncation_all_of_a_handful_of_rows():
    # a canary or a pasted excerpt: every row seen is cut off -> a finding, decided at the end
    for n in (1, 3, 10, 19):
        hits = run(rows(n, n))
        assert [(h.label, h.severity, h.action) for h in hits] == [("truncation", "warning", "stop")], n
        seen = "the only completion seen," if n == 1 else f"all {n} completions seen"
        assert seen in hits[0].message and "raise max_tokens" in hits[0].message
    # one cut row among a few that ended well, or among many: quiet
    assert run(rows(5, 4)) == [] and run(rows(2, 1)) == [] and run(rows(40, 1)) == []
    # streaming: not decided before the end (more rows may come)
    s = LogScanner()
    assert s.feed(rows(3, 3).encode()) == [] and labels(s.finish()) == {"truncation"}


def test_truncation_vllm_repr_and_llama_cpp_dict_rows():
    repr_row = ("[RequestOutput(request_id=0, prompt='Hi', outputs=[CompletionOutput(index=0, text=' I am', "
                "token_ids=[1, 2], cumulative_logprob=-2.2, logprobs=None, finish_reason=length)], finished=True)]\n")
    dict_row = ("{'id': 'cmpl-1', 'object': 'text_completion', 'choices': [{'text': 'Step 1', 'index': 0, "
                "'logprobs': None, 'finish_reason': 'length'}], 'usage': {'completion_tokens': 16}}\n")
    for row in (repr_row, dict_row, repr_row * 2 + dict_row):
        assert labels(run(row)) == {"truncation"}
    streamed = repr_row.replace("finish_reason=length", "finish_reason=None") * 5 + repr_row
    assert labels(run(streamed)) == {"truncation"}      # finish_reason=None rows are not completions


def test_truncation_from_trainer_metrics():
    row = "{'loss': 0.0, 'completions/clipped_ratio': %s, 'completions/mean_terminated_length': %s, 'epoch': %d}\n"
    hits = run("".join(row % ("1.0", "0.0", i) for i in range(3)))
    assert [h.label for h in hits] == ["truncation"]
    assert hits[0].message.startswith("Trainer completions were clipped at the response length limit (all 3 logged steps")
    assert (hits[0].severity, hits[0].action) == ("warning", "stop")
    assert "raise max_completion_length" in hits[0].message
    assert labels(run(row % ("0.75", "0.0", 0))) == {"truncation"}       # nothing terminated
    assert labels(run(row % ("1", "512.0", 0))) == {"truncation"}         # everything clipped
    assert run(row % ("0.0", "300.5", 0) + row % ("1.0", "0.0", 1)) == []  # 1 of 2 steps: quiet
    many = "".join(row % ("1.0" if i < 3 else "0.1", "0.0" if i < 3 else "200.0", i) for i in range(40))
    assert labels(run(many)) == {"truncation"}                            # 3 of 40 steps >= 5%


def test_truncation_harness_context_notices():
    for line in ("[ WARNING]: context_size + max_new_tokens=33238 which is greater than self.max_length=32768. "
                 "Truncating context to 0 tokens. (vllm_model.py:276)",
                 "2026-04-29:23:50:05 WARNING  [models.huggingface:914] Left truncation applied. Original sequence "
                 "length was 1364, truncating to last 1024 tokens. Some content will be lost."):
        hits = run(line + "\n")
        assert [(h.label, h.severity) for h in hits] == [("truncation", "warning")]
        assert hits[0].message.startswith("The eval harness truncated prompts to fit the context window at line 1 "
                                          "(evidence: the eval harness said it cut the context):")
        assert "max_model_len" in hits[0].message and "raise max_tokens" not in hits[0].message
    # repeated notices of one run: one finding; and they do not explain away a later crash
    log = ("Truncating context to 0 tokens.\n" * 30 + TB)
    assert [h.label for h in run(log)] == ["truncation", "traceback"]


def test_truncation_early_report_while_streaming():
    s = LogScanner()
    out = s.feed(rows(25, 25).encode())                   # all truncated: reported before finish
    assert labels(out) == {"truncation"}
    assert s.finish() == []


# --------------------------------------------------------------------------- scheduler state

@pytest.mark.parametrize("state,code,label", [
    ("OUT_OF_MEMORY", None, "host_oom"),
    ("OUT_OF_MEMORY+", 0, "host_oom"),
    ("TIMEOUT", None, "time_limit"),
    ("PREEMPTED", None, "preempted"),
    ("NODE_FAIL", 1, "node_fail"),
    ("FAILED", 137, "killed"),
    ("FAILED", -9, "killed"),
])
def test_findings_for_state(state, code, label):
    hits = findings_for_state(state, code)
    assert [(h.label, h.line) for h in hits] == [(label, 0)]
    assert hits[0].severity == P.ALL_LABELS[label][0] and hits[0].action == P.ALL_LABELS[label][1]


@pytest.mark.parametrize("state,code", [("COMPLETED", 0), ("FAILED", 1), ("CANCELLED by 0", None), ("RUNNING", None), ("", None)])
def test_findings_for_state_nothing(state, code):
    assert findings_for_state(state, code) == []
