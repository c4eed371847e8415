"""The workstation's GPUs: each local job gets its own, the others wait in a queue.

The queue is a table of the state database (``local_gpu_queue``), so it outlives runjob
being killed, and every decision (which GPUs are free, which waiting job starts on them)
is taken and recorded in one ``BEGIN IMMEDIATE`` transaction: two runjob processes never
give one GPU to two jobs. A row is ``queued`` until its GPUs are free, then ``running``
with the pid of its runner and the GPUs it got (``CUDA_VISIBLE_DEVICES``); a running row
whose runner is gone is deleted, which frees its GPUs. There is no daemon: the queue moves
whenever a runjob process polls a waiting job (``runjob watch``, ``runjob status``).

A GPU counts as busy when a runjob job holds it, or when processes runjob did not start
use more than ``gpu_busy_gib`` of its memory (someone's notebook, another tool's job).
"""

from __future__ import annotations

import json
import time

from runjob_core.errors import BackendError
from runjob_core.gpu import Gpu, GpuQueryError, read_gpus

SCHEMA = """
CREATE TABLE IF NOT EXISTS local_gpu_queue(
    tag TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    gpus INTEGER NOT NULL,
    gpu_type TEXT,
    enqueued_at REAL NOT NULL,
    state TEXT NOT NULL,
    argv_json TEXT NOT NULL,
    cwd TEXT,
    log_path TEXT NOT NULL,
    gpu_uuids TEXT,
    gpu_indices TEXT,
    pid TEXT,
    start_time TEXT,
    started_at REAL,
    reason TEXT
)
"""
#: Memory (GiB) that processes runjob did not start may hold on a GPU before it counts as busy.
DEFAULT_BUSY_GIB = 1.0
_MIB_PER_GIB = 1024.0
#: Rows of ended jobs are kept this long (seconds) after the job started.
KEEP_ENDED_SECONDS = 7 * 24 * 3600.0


def _db(context):
    return context.store.plugin_connection(SCHEMA)


def same_type(gpu_name: str, wanted: str) -> bool:
    """Whether a GPU nvidia-smi names *gpu_name* ("NVIDIA H200") is of type *wanted* ("h200")."""
    from runjob_core.errors import RunjobError
    from runjob_core.estimator.gpus import gpu_key, lookup_gpu

    try:
        return lookup_gpu(gpu_name).name == lookup_gpu(wanted).name
    except RunjobError:  # not in the catalog: compare the names themselves
        return gpu_key(wanted) in gpu_key(gpu_name)


def describe(gpus: list[Gpu]) -> str:
    return ", ".join(f"{g.index}: {g.name}" for g in gpus) or "none"


def inventory(context, *, timeout: float | None = None) -> list[Gpu] | None:
    kw = {} if timeout is None else {"timeout": timeout}
    return read_gpus(context.run, **kw)


def refusal(job, gpus: list[Gpu] | None) -> str | None:
    """Why this machine can never run *job*'s GPUs, or None when it can."""
    want, wanted_type = job.resources.gpus, job.resources.gpu_type
    if want <= 0:
        return None
    if not gpus:
        why = "nvidia-smi was not found" if gpus is None else "nvidia-smi lists no GPU"
        return (f"resources.gpus is {want} but this machine has no GPU ({why}); "
                "set resources.gpus: 0 or choose a cluster with GPUs")
    matching = [g for g in gpus if not wanted_type or same_type(g.name, wanted_type)]
    if wanted_type and not matching:
        return (f"resources.gpu_type is {wanted_type!r} but this machine has {describe(gpus)}; "
                "change resources.gpu_type or leave it out")
    if want > len(matching):
        return (f"resources.gpus is {want} but this machine has {len(matching)} GPU{'s' if len(matching) != 1 else ''} "
                f"({describe(matching)}); ask for at most {len(matching)}")
    return None


def place(context, cluster, job, attempt, argv: list[str], cwd: str, log_path: str, start) -> dict[str, str]:
    """Queue *attempt* and start it at once if its GPUs are free (and nothing waits before it).

    *start(argv, cwd, log_path, env)* starts the runner and returns ``(pid, start_time)``.
    Returns the submission's ``extra`` entries: the pid and GPUs, or ``queued`` and the reason.
    :raises BackendError: nvidia-smi cannot be read, or the machine can never run the job.
    """
    try:
        gpus = inventory(context)
    except GpuQueryError as exc:
        raise BackendError(f"cannot see this machine's GPUs: {exc}") from None
    why = refusal(job, gpus)
    if why:
        raise BackendError(why)
    db = _db(context)
    with context.store.transaction():
        db.execute("INSERT INTO local_gpu_queue(tag, job_id, n, gpus, gpu_type, enqueued_at, state, argv_json, cwd,"
                   " log_path) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   (attempt.tag, attempt.job_id, attempt.n, job.resources.gpus, job.resources.gpu_type, time.time(),
                    "queued", json.dumps(argv), cwd, log_path))
        _dispatch_locked(context, cluster, gpus or [], start)
        row = _row(db, attempt.tag)
    if row["state"] == "running":
        return {"pid": row["pid"], "start_time": row["start_time"], "started_at": repr(row["started_at"]),
                "gpus": row["gpu_indices"], "gpu_uuids": row["gpu_uuids"]}
    return {"queued": "1", "reason": row["reason"] or ""}


def _row(db, tag: str):
    return db.execute("SELECT * FROM local_gpu_queue WHERE tag = ?", (tag,)).fetchone()


def row(context, tag: str) -> dict | None:
    found = _row(_db(context), tag)
    return dict(found) if found is not None else None


def dispatch(context, cluster, start) -> None:
    """Start the waiting jobs whose GPUs are free, first come first served. Never raises
    for an unreadable nvidia-smi: the waiting jobs keep waiting with the reason."""
    db = _db(context)
    if db.execute("SELECT 1 FROM local_gpu_queue WHERE state = 'queued' LIMIT 1").fetchone() is None:
        return
    try:
        gpus = inventory(context) or []
    except GpuQueryError as exc:
        with context.store.transaction():
            db.execute("UPDATE local_gpu_queue SET reason = ? WHERE state = 'queued'",
                       (f"waiting: cannot see this machine's GPUs ({exc})",))
        return
    with context.store.transaction():
        _dispatch_locked(context, cluster, gpus, start)


def _busy_gib(cluster) -> float:
    options = getattr(cluster, "options", None)
    value = getattr(options, "gpu_busy_gib", None)
    return DEFAULT_BUSY_GIB if value is None else float(value)


def _dispatch_locked(context, cluster, gpus: list[Gpu], start) -> None:
    from runjob_core.transport.detached import process_start_time

    db = _db(context)
    rows = db.execute("SELECT * FROM local_gpu_queue ORDER BY enqueued_at, rowid").fetchall()
    held: set[str] = set()
    ours: set[int] = set()
    for entry in rows:
        if entry["state"] != "running":
            continue
        if entry["pid"] and process_start_time(int(entry["pid"])) == entry["start_time"]:
            held.update(json.loads(entry["gpu_uuids"] or "[]"))
            ours.add(int(entry["pid"]))
        else:  # its runner ended (or the machine rebooted): its GPUs are free again
            db.execute("UPDATE local_gpu_queue SET state = 'ended' WHERE tag = ?", (entry["tag"],))
    # Ended rows stay a while for status (when the job ran, on which GPUs), then go.
    db.execute("DELETE FROM local_gpu_queue WHERE state = 'ended' AND started_at < ?", (time.time() - KEEP_ENDED_SECONDS,))
    threshold = _busy_gib(cluster) * _MIB_PER_GIB
    busy_elsewhere = {g.uuid for g in gpus if g.uuid not in held and _used_by_others(g, ours) > threshold}
    free = [g for g in gpus if g.uuid not in held and g.uuid not in busy_elsewhere]
    blocked = False
    for entry in rows:
        if entry["state"] != "queued":
            continue
        fits = [g for g in free if not entry["gpu_type"] or same_type(g.name, entry["gpu_type"])]
        present = [g for g in gpus if not entry["gpu_type"] or same_type(g.name, entry["gpu_type"])]
        want = entry["gpus"]
        if want > len(present):
            # A GPU went away while the job waited: it stays queued with the reason, and does
            # not hold up the jobs behind it (they may fit).
            reason = f"waiting for {want} GPUs, this machine now shows {len(present)} ({describe(present)})"
        elif blocked or len(fits) < want:
            others = len([g for g in present if g.uuid in busy_elsewhere])
            reason = f"waiting for {want} GPU{'s' if want != 1 else ''}, {len(fits)} free"
            reason += f" ({others} busy with processes runjob did not start)" if others else ""
            reason += ", behind an earlier job" if blocked and len(fits) >= want else ""
            blocked = True  # first come, first served: no later job jumps the queue
        else:
            taken, free = fits[:want], [g for g in free if g not in fits[:want]]
            uuids = [g.uuid for g in taken]
            indices = ",".join(str(g.index) for g in taken)
            env = {"CUDA_VISIBLE_DEVICES": ",".join(uuids), "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                   "RUNJOB_GPU_INDICES": indices}
            pid, start_time = start(json.loads(entry["argv_json"]), entry["cwd"], entry["log_path"], env)
            db.execute("UPDATE local_gpu_queue SET state = 'running', gpu_uuids = ?, gpu_indices = ?, pid = ?,"
                       " start_time = ?, started_at = ?, reason = NULL WHERE tag = ?",
                       (json.dumps(uuids), indices, str(pid), start_time, time.time(), entry["tag"]))
            context.event(entry["job_id"], "gpus", f"attempt {entry['n']}: started on GPU {indices} "
                          f"({', '.join(g.name for g in taken)})", attempt=entry["n"], source="runjob-local",
                          gpus=indices, uuids=uuids)
            continue
        if reason != entry["reason"]:
            db.execute("UPDATE local_gpu_queue SET reason = ? WHERE tag = ?", (reason, entry["tag"]))


def _used_by_others(gpu: Gpu, ours: set[int]) -> float:
    """MiB held on *gpu* by processes runjob did not start (all of it when nvidia-smi does
    not say which processes: a container often hides them)."""
    if not gpu.processes:
        return gpu.memory_used_mib
    return sum(mib for pid, mib in gpu.processes if _session(pid) not in ours)


def _session(pid: int) -> int | None:
    # A local job's runner leads its own session; every process of the job is in it.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def forget(context, tag: str) -> dict | None:
    """Take *tag* out of the queue (cancel); returns its row as it was."""
    db = _db(context)
    with context.store.transaction():
        found = _row(db, tag)
        db.execute("DELETE FROM local_gpu_queue WHERE tag = ? AND state = 'queued'", (tag,))
    return dict(found) if found is not None else None
