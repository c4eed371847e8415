"""The SLURM commands the poller runs, and what their output means.

Pure functions, standard library only. Verified against SLURM 22.05 (slurmdbd accounting).

Output formats
--------------
* Times: every command is run under ``env SLURM_TIME_FORMAT=%s``, so squeue/sacct/sinfo
  print epoch seconds and the poller never guesses the cluster's time zone. ISO times
  (``2026-12-02T16:59:12``, read as *local* time) are still accepted as a fallback.
* Fields are separated by ``|``. Every field but the free-text ones (comment, name) is
  pipe-free by construction (ids, states, reason codes, times, node lists, partitions), so
  the free text goes last and lines are split with ``maxsplit``:
  ``squeue``: ``...|%P|%k|%j``: the comment (runjob's tag, pipe-free) then the name, which
  may contain ``|``. A foreign job whose *comment* has a ``|`` gets the rest of its comment
  counted into its name; its id, state and times still parse.
  ``sacct`` has no free-text field at all (``-P`` uses ``|``).
* Ids are text: ``12345``, array tasks ``14_0`` (pending: ``30_[0-3]``), het-job
  components ``50+0``. ``sbatch --parsable`` returns the bare id, so an array or het job
  submitted as ``14`` shows up under other ids; runjob submits neither.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Iterable, NamedTuple

#: What a value on an ``#SBATCH`` line may be made of: sbatch reads those lines itself (no
#: shell) and splits them on whitespace.
SBATCH_SAFE = re.compile(r"^[A-Za-z0-9._:/@%+=,~-]+$")

TIME_ENV = ["env", "SLURM_TIME_FORMAT=%s"]

SQUEUE_FORMAT = "%i|%A|%T|%r|%S|%e|%M|%N|%P|%k|%j"
SACCT_FIELDS = "JobID,JobIDRaw,State,ExitCode,Reason,Start,End,NodeList,Elapsed"
SACCT_CHUNK = 200
#: runjob_core.job.RESUME_EXIT_CODE: the job saved on purpose and wants resuming.
RESUME_EXIT_CODE = 75
SINFO_FORMAT = "%P|%a|%l|%c|%m|%G"

#: Values SLURM prints for "no value".
_EMPTY = {"", "None", "NONE", "none", "Unknown", "N/A", "n/a", "(null)", "None assigned"}


# ----------------------------------------------------------------------------- argv


#: What a poll needs (no comment or name): 11 fields like SQUEUE_FORMAT, the last two empty.
SQUEUE_POLL_FORMAT = "%i|%A|%T|%r|%S|%e|%M|%N|%P||"


def squeue_argv(user: str) -> list[str]:
    """All of *user*'s jobs in one call, finished ones too (until MinJobAge runs out), with
    their comments (runjob's tags): for reattaching.

    ``-u`` is filtered in slurmctld; ``-j ids`` would make it send every job record."""
    return [*TIME_ENV, "squeue", "-h", "-r", "-u", user, "-t", "all", "-o", SQUEUE_FORMAT]


#: Up to this many jobs are asked of squeue by id (``-j``): its answer, and runjob's parse of
#: it, hold only them, not every job of the user (a one-shot ``runjob status`` lists 20 jobs of
#: a user with 2,000 queued: 20 lines, ~6 ms less than all 2,000). More go as one ``-u``.
FEW_JOBS = 200
_POLLED_ID = re.compile(r"\d+(_\d+)?")


def squeue_poll_argv(user: str, jobs: list[str] | None = None) -> list[str]:
    """*user*'s live jobs (only *jobs* among them, when they are few), compactly: one poll;
    ``-r``: one line per array task (``ARRAYID_TASK``), pending ones too. Jobs that ended are
    asked of sacct instead (squeue has no exit codes anyway), so finished records in MinJobAge
    cost nothing."""
    only: list[str] = []
    # Only ids squeue takes (an id it cannot parse fails the whole call): else the user's list.
    if jobs and len(jobs) <= FEW_JOBS and all(_POLLED_ID.fullmatch(job) for job in jobs):
        ids = list(dict.fromkeys(jobs))
        # One id alone makes squeue (22.05) ask slurmctld for that job, and fail with "Invalid
        # job id specified" once it left the queue; the same id twice takes the user's list.
        only = ["-j", ",".join(ids * 2 if len(ids) == 1 else ids)]
    return [*TIME_ENV, "squeue", "-h", "-r", "-u", user, *only, "-o", SQUEUE_POLL_FORMAT]


#: Listing runjob's jobs for adoption: id, state, working folder (``--chdir``: the job's
#: folder, where runjob.json is) and comment (the tag) last (a foreign comment may hold '|').
SQUEUE_TAGGED_FORMAT = "%i|%T|%Z|%k"


def squeue_tagged_argv() -> list[str]:
    """The caller's live jobs with their folders and comments, in one call."""
    return ["squeue", "--me", "-h", "-o", SQUEUE_TAGGED_FORMAT]


def parse_tagged(text: str) -> list[tuple[str, str, str | None, str]]:
    """``squeue_tagged_argv`` output -> (job id, runjob state, folder, tag) of each job whose
    comment is a runjob tag."""
    jobs = []
    for line in _lines(text):
        parts = line.split("|", 3)
        if len(parts) == 4 and parts[3].startswith("runjob:"):
            job_id, state, folder, tag = parts
            jobs.append((job_id, map_state(state, "", None)[0], _opt(folder), tag.strip()))
    return jobs


def sacct_argv(job_ids: Iterable[str], chunk: int = SACCT_CHUNK) -> list[list[str]]:
    """Allocation rows (``-X``, no steps) for *job_ids*, at most *chunk* ids per call.

    No ``-D``: a requeued job shows only its latest run. With ``-j`` sacct searches all
    time, not just today."""
    ids = list(dict.fromkeys(job_ids))
    return [[*TIME_ENV, "sacct", "-n", "-X", "-P", "-o", SACCT_FIELDS, "-j", ",".join(ids[i:i + chunk])]
            for i in range(0, len(ids), chunk)]


def sacct_reattach_argv(user: str, since: float) -> list[str]:
    """The user's jobs submitted since *since* (epoch seconds), with their submit line (last:
    it may hold '|'). For finding a job by its script when squeue no longer lists it."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    return [*TIME_ENV, "sacct", "-X", "-n", "-P", "-u", user, "-S", start, "-o", "JobID,JobName,SubmitLine"]


def find_by_script(sacct_output: str, script_path: str) -> str | None:
    """The newest job whose submit line ends with *script_path* (``sacct_reattach_argv``)."""
    found = None
    for line in sacct_output.splitlines():
        job_id, _, rest = line.partition("|")
        _name, _, submit_line = rest.partition("|")
        if script_path and submit_line.strip().endswith(" " + script_path) and job_id.isdigit():
            if found is None or int(job_id) > int(found):
                found = job_id
    return found


def find_array_task(sacct_output: str, script_path: str, task: int) -> str | None:
    """``ARRAYID_TASK`` of task *task* of the newest array whose submit line ends with
    *script_path* (``sacct_reattach_argv`` output)."""
    found = None
    for line in sacct_output.splitlines():
        job_id, _, rest = line.partition("|")
        _name, _, submit_line = rest.partition("|")
        array_id, sep, index = job_id.partition("_")
        if sep and array_id.isdigit() and index == str(task) and submit_line.strip().endswith(" " + script_path):
            if found is None or int(array_id) > int(found.partition("_")[0]):
                found = job_id
    return found


def attempt_window_start(runjob_id: str, slack: float = 86400.0) -> float:
    """When the attempt's job could first have been submitted: the runjob id starts with its
    creation time in base 36 (``rj-<seconds><hex>``); a day of slack for time zones and skew."""
    try:
        created = int(runjob_id.removeprefix("rj-")[:-6], 36)
    except ValueError:
        return time.time() - 30 * 86400
    return created - slack


def sacct_steps_argv(job_id: str) -> list[str]:
    """One job with its steps (``11``, ``11.batch``, ``11.0``): run only for a job that ended
    FAILED or CANCELLED, to see whether a step ran out of memory (see ``merge``)."""
    return [*TIME_ENV, "sacct", "-n", "-P", "-o", SACCT_FIELDS, "-j", job_id]


def sacct_maxrss_argv(job_id: str) -> list[str]:
    """Every step of *job_id* with its MaxRSS (the batch step holds a plain script's peak)."""
    return ["sacct", "-n", "-P", "-o", "JobID,MaxRSS", "-j", job_id]


def max_rss_field(text: str) -> str | None:
    """The largest MaxRSS of ``sacct_maxrss_argv`` output, as sacct wrote it ("123456K"),
    or None when no step was accounted (jobacct_gather/none leaves the field empty)."""
    best, best_text = -1.0, None
    scale = {"K": 1, "M": 1 << 10, "G": 1 << 20, "T": 1 << 30}
    for line in _lines(text):
        _job, _, rss = line.partition("|")
        rss = rss.strip()
        if not rss or rss in _EMPTY:
            continue
        unit = rss[-1] if rss[-1] in scale else "K"
        try:
            value = float(rss.rstrip("KMGT")) * scale[unit]
        except ValueError:
            continue
        if value > best:
            best, best_text = value, rss
    return best_text


def partitions_argv() -> list[str]:
    """Partitions: name (``*`` marks the default), up/down, MaxTime, CPUs and MB per node, GRES."""
    return [*TIME_ENV, "sinfo", "-h", "-o", SINFO_FORMAT]


# ----------------------------------------------------------------------------- values


def parse_time(text: str) -> float | None:
    """Epoch seconds (``SLURM_TIME_FORMAT=%s``) or ISO local time; "Unknown"/"None"/"N/A" -> None."""
    text = text.strip()
    if text in _EMPTY:
        return None
    if text.isdigit():
        return float(text)
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse_duration(text: str) -> int | None:
    """SLURM's ``[D-]HH:MM:SS``, ``MM:SS``, ``MM``, ``D-HH[:MM]`` -> seconds.

    "infinite"/"UNLIMITED"/"NONE" and anything unreadable -> None."""
    text = text.strip()
    days = 0
    if "-" in text:
        day_text, _, text = text.partition("-")
        if not day_text.isdigit():
            return None
        days = int(day_text)
    parts = text.split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    numbers = [int(p) for p in parts]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        numbers += [0] * (3 - len(numbers))
    elif len(numbers) == 1:  # MM
        numbers = [0, numbers[0], 0]
    elif len(numbers) == 2:  # MM:SS
        numbers = [0, *numbers]
    hours, minutes, seconds = numbers
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def parse_exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct's ``exit:signal`` -> (exit code, signal or None). ``3:0`` -> (3, None); ``0:11`` -> (0, 11)."""
    code, _, signal = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    return int(code), (int(signal) or None) if signal.isdigit() else None


def _opt(text: str) -> str | None:
    text = text.strip()
    return None if text in _EMPTY else text


# ----------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class SqueueRow:
    job_id: str  # %i: 12, 14_0, 30_[0-3], 50+0
    raw_id: str  # %A
    state: str  # %T, e.g. PENDING, RUNNING, COMPLETING, COMPLETED
    reason: str | None  # %r
    start: float | None  # %S: actual start, or the *expected* start of a pending job
    end: float | None  # %e: actual end, or the *expected* end of a running job
    elapsed: int | None  # %M, seconds
    nodes: str | None  # %N
    partition: str | None  # %P
    comment: str | None  # %k
    name: str  # %j


@dataclass(frozen=True)
class SacctRow:
    job_id: str  # JobID: 12, 14_0, 50+0, 11.batch, 11.0
    raw_id: str  # JobIDRaw
    state: str  # e.g. "CANCELLED by 1001"
    exit_code: str  # "3:0"
    reason: str | None  # the last scheduler reason; stale for jobs that ran
    start: float | None
    end: float | None
    nodes: str | None
    elapsed: int | None


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    state: str  # "up", "down", "drain", "inact"
    max_time: int | None  # seconds; None = unlimited
    cpus: int | None  # most CPUs on one node
    mem_mb: int | None  # most memory on one node, MB
    gres: tuple[str, ...]  # e.g. ("gpu:h100:2",)
    default: bool


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def squeue_lines(text: str, wanted: Iterable[str] | None = None) -> dict[str, str]:
    """``squeue`` output -> each line by its job id (the first field), only *wanted* ids.

    ``-t all`` lists every job the user ran in the last MinJobAge, often ten times more
    than runjob is following: the others are never parsed."""
    keep = set(wanted) if wanted is not None else None
    lines = {}
    for line in text.splitlines():
        job_id = line.split("|", 1)[0]
        if line.strip() and (keep is None or job_id in keep):
            lines[job_id] = line
    return lines


def parse_squeue_lines(lines: Iterable[str]) -> dict[str, SqueueRow]:
    """``squeue_argv``/``squeue_poll_argv`` lines -> rows by job id. Lines that don't fit are skipped."""
    rows = {}
    for line in lines:
        parts = line.split("|", 10)
        if len(parts) != 11:
            continue
        job_id, raw_id, state, reason, start, end, used, nodes, partition, comment, name = parts
        rows[job_id] = SqueueRow(job_id=job_id, raw_id=raw_id, state=state, reason=_opt(reason),
                                 start=parse_time(start), end=parse_time(end), elapsed=parse_duration(used),
                                 nodes=_opt(nodes), partition=_opt(partition), comment=_opt(comment), name=name)
    return rows


def parse_squeue(text: str, wanted: Iterable[str] | None = None) -> dict[str, SqueueRow]:
    """``squeue`` output -> rows by job id, only *wanted* ids (all when None)."""
    return parse_squeue_lines(squeue_lines(text, wanted).values())


def parse_sacct(text: str) -> dict[str, SacctRow]:
    """``sacct_argv``/``sacct_steps_argv`` output -> rows by job id (steps by ``ID.step``).

    With ``-D`` a job has several rows; the last one (the latest run) wins."""
    rows = {}
    for line in _lines(text):
        parts = line.split("|")
        if len(parts) != 9:
            continue
        job_id, raw_id, state, exit_code, reason, start, end, nodes, elapsed = parts
        rows[job_id] = SacctRow(job_id=job_id, raw_id=raw_id, state=state.strip(), exit_code=exit_code,
                                reason=_opt(reason), start=parse_time(start), end=parse_time(end),
                                nodes=_opt(nodes), elapsed=parse_duration(elapsed))
    return rows


def parse_partitions(text: str) -> list[PartitionInfo]:
    """``partitions_argv`` output -> one record per partition (sinfo splits a partition
    into several lines when its nodes differ; they are merged)."""
    merged: dict[str, dict] = {}
    for line in _lines(text):
        parts = line.split("|", 5)
        if len(parts) != 6:
            continue
        name, state, limit, cpus, mem, gres = (p.strip() for p in parts)
        default = name.endswith("*")
        name = name.rstrip("*")
        entry = merged.setdefault(name, {"state": state, "max_time": parse_duration(limit), "cpus": None,
                                         "mem_mb": None, "gres": [], "default": default})
        if cpus.rstrip("+").isdigit():
            entry["cpus"] = max(entry["cpus"] or 0, int(cpus.rstrip("+")))
        if mem.rstrip("+").isdigit():
            entry["mem_mb"] = max(entry["mem_mb"] or 0, int(mem.rstrip("+")))
        for item in gres.split(","):
            item = item.split("(", 1)[0].strip()  # "gpu:h100:2(S:0-1)"
            if item and item not in _EMPTY and item not in entry["gres"]:
                entry["gres"].append(item)
    return [PartitionInfo(name=name, state=e["state"], max_time=e["max_time"], cpus=e["cpus"], mem_mb=e["mem_mb"],
                          gres=tuple(e["gres"]), default=e["default"]) for name, e in merged.items()]


def parse_sbatch_parsable(stdout: str) -> str:
    """``sbatch --parsable`` prints ``12345`` or ``12345;cluster``: return the id."""
    for line in reversed(_lines(stdout)):
        job_id = line.strip().split(";", 1)[0]
        if job_id.isdigit():
            return job_id
    raise ValueError(f"no job id in sbatch output: {stdout.strip()!r}")


def find_by_comment(squeue_rows: dict[str, SqueueRow], tag: str) -> str | None:
    """The id of the job whose comment is *tag*; if several (a resubmission), the newest
    one that is still queued or running, else the newest."""
    hits = [row for row in squeue_rows.values() if row.comment == tag]
    if not hits:
        return None
    live = [row for row in hits if map_state(row.state, "", row.reason)[0] in ("PENDING", "RUNNING", "REQUEUED")]

    def newest(row: SqueueRow) -> tuple[int, str]:
        return (int(row.raw_id) if row.raw_id.isdigit() else -1, row.job_id)

    return max(live or hits, key=newest).job_id


# ----------------------------------------------------------------------------- states

#: SLURM state -> (runjob state, reason to report instead of the scheduler's).
#: CONFIGURING/COMPLETING/SUSPENDED/STOPPED/SIGNALING/STAGE_OUT count as RUNNING: the job
#: holds its nodes and is not finished; COMPLETING does not yet say *how* it ended, so the
#: poller waits for the final state. REQUEUE_* and RESIZING count as REQUEUED (it will
#: run again). BOOT_FAIL/DEADLINE/SPECIAL_EXIT are FAILED, REVOKED (federation) CANCELLED.
STATE_MAP: dict[str, tuple[str, str | None]] = {
    "PENDING": ("PENDING", None),
    "RESV_DEL_HOLD": ("PENDING", "held: its reservation was deleted"),
    "RUNNING": ("RUNNING", None),
    "CONFIGURING": ("RUNNING", "CONFIGURING: its nodes are booting"),
    "COMPLETING": ("RUNNING", "COMPLETING: the job ended, SLURM is cleaning up"),
    "SUSPENDED": ("RUNNING", "SUSPENDED by an administrator or preemption"),
    "STOPPED": ("RUNNING", "STOPPED (SIGSTOP)"),
    "SIGNALING": ("RUNNING", None),
    "STAGE_OUT": ("RUNNING", "STAGE_OUT: burst buffer stage-out"),
    "COMPLETED": ("COMPLETED", None),
    "FAILED": ("FAILED", None),
    "CANCELLED": ("CANCELLED", None),
    "TIMEOUT": ("TIMEOUT", None),
    "OUT_OF_MEMORY": ("OUT_OF_MEMORY", None),
    "PREEMPTED": ("PREEMPTED", None),
    "NODE_FAIL": ("NODE_FAIL", None),
    "REQUEUED": ("REQUEUED", None),
    "REQUEUE_HOLD": ("REQUEUED", "requeued and held: scontrol release <id> lets it run"),
    "REQUEUE_FED": ("REQUEUED", None),
    "RESIZING": ("REQUEUED", "RESIZING"),
    "BOOT_FAIL": ("FAILED", "BOOT_FAIL: a node failed to boot"),
    "DEADLINE": ("FAILED", "DEADLINE: the job could not finish before its --deadline"),
    "SPECIAL_EXIT": ("FAILED", "SPECIAL_EXIT: the job asked to be held for special handling"),
    "REVOKED": ("CANCELLED", "REVOKED: another cluster of the federation ran it"),
}

#: Reasons a job collects while it waits; sacct keeps the last one even after the job ran.
_WAITING = ("Priority", "Resources", "BeginTime", "Dependency", "JobHeld", "Partition", "QOS", "Assoc",
            "ReqNodeNotAvail", "Nodes required", "job requeued", "Reservation", "Licenses")

_ACTIVE = ("PENDING", "RUNNING", "REQUEUED")


def map_state(raw_state: str, exit_code_field: str, reason: str | None
              ) -> tuple[str, int | None, int | None, str | None]:
    """SLURM's words -> (runjob state, exit code, signal, reason).

    Exit code and signal only for finished jobs (sacct ``3:0`` -> 3, ``0:9`` -> signal 9;
    OUT_OF_MEMORY is ``0:125``). An unknown state counts as RUNNING so that polling goes
    on, with the raw state as the reason."""
    words = raw_state.strip().rstrip("+").split()
    name = words[0] if words else ""
    reason = _opt(reason or "")
    if name not in STATE_MAP:
        return "RUNNING", None, None, f"unrecognised SLURM state {raw_state.strip()!r}"
    state, own_reason = STATE_MAP[name]
    if state in _ACTIVE:
        return state, None, None, own_reason or reason
    code, signal = parse_exit_code(exit_code_field)
    if name == "CANCELLED":  # sacct: "CANCELLED by 1001"
        return state, code, signal, f"cancelled by uid {words[2]}" if words[1:2] == ["by"] else "cancelled"
    if state == "COMPLETED" or (reason and reason.startswith(_WAITING)):
        reason = None
    return state, code, signal, own_reason or reason


# ----------------------------------------------------------------------------- merge


class JobInfo(NamedTuple):
    state: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    started: float | None
    ended: float | None
    node: str | None


#: Final states whose steps are worth a look: an ``srun`` step killed for memory leaves the
#: job FAILED 1:0, and a job cancelled after a step was OOM-killed (runjob stops a job whose
#: log shows the kill) says CANCELLED while its step says OUT_OF_MEMORY. A TIMEOUT job's batch
#: step may say the job's command ended by itself (see ``own_ending``).
STEPS_CHECKED = ("FAILED", "CANCELLED", "TIMEOUT")


def own_ending(sacct_rows: dict[str, SacctRow], job_id: str, state: str) -> tuple[str, int, str] | None:
    """The job's own ending where it overrides SLURM's TIMEOUT: (state, exit code, reason).

    SLURM enforces time limits on a timer (about every 30 s), so a job that finished its work
    just after the limit is recorded as ``TIMEOUT 0:0`` while its batch step, the job script
    itself, says ``COMPLETED 0:0``: the work is done and must not be resumed. A batch step
    that exited 75 (``runjob_core.job.RESUME_EXIT_CODE``) saved on the warning and asked to be
    resumed: that is a save, reported as the FAILED 75 the monitor resumes as such."""
    batch = sacct_rows.get(f"{job_id}.batch")
    if state != "TIMEOUT" or batch is None:
        return None
    code, signal = parse_exit_code(batch.exit_code)
    if signal is not None:
        return None
    if batch.state == "COMPLETED" and code == 0:
        return "COMPLETED", 0, "the job's command exited 0 just after the time limit (SLURM recorded TIMEOUT)"
    if code == RESUME_EXIT_CODE:
        return "FAILED", code, "the job saved and exited 75 to be resumed (SLURM recorded TIMEOUT)"
    return None


def needs_sacct(job_ids: Iterable[str], squeue_rows: dict[str, SqueueRow]) -> list[str]:
    """Ids to ask sacct about: gone from squeue, or finished (squeue has no exit codes)."""
    wanted = []
    for job_id in job_ids:
        row = squeue_rows.get(job_id)
        if row is None or map_state(row.state, "", row.reason)[0] not in _ACTIVE:
            wanted.append(job_id)
    return wanted


def oom_steps(sacct_rows: dict[str, SacctRow], job_id: str) -> list[str]:
    """Steps of *job_id* (from ``sacct_steps_argv``) that ended OUT_OF_MEMORY."""
    return [row.job_id for row in sacct_rows.values()
            if row.job_id.startswith(f"{job_id}.") and row.state.startswith("OUT_OF_MEMORY")]


def merge(submitted_ids: Iterable[str], squeue_rows: dict[str, SqueueRow],
          sacct_rows: dict[str, SacctRow]) -> dict[str, JobInfo]:
    """One JobInfo per submitted id.

    * sacct wins once it says the job finished (it has the exit code, and it was asked
      after squeue); squeue wins while the job is alive (its pending reason is current).
    * squeue says finished but sacct still says running: sacct lags about 0.5 s, so the
      job is reported RUNNING for one more poll rather than finished without an exit code.
    * Ids in neither are LOST.
    * A FAILED or CANCELLED job whose steps (``sacct_steps_argv``, merged into *sacct_rows*)
      include an OUT_OF_MEMORY step becomes OUT_OF_MEMORY.
    * A TIMEOUT job whose batch step ended by itself with 0 (or 75) is what its batch step
      says (``own_ending``): the job's own ending wins over the scheduler's timer."""
    result = {}
    for job_id in submitted_ids:
        queued, accounted = squeue_rows.get(job_id), sacct_rows.get(job_id)
        from_sacct = map_state(accounted.state, accounted.exit_code, accounted.reason) if accounted else None
        if from_sacct and (queued is None or from_sacct[0] not in _ACTIVE):
            state, code, signal, reason = from_sacct
            start, end, node = accounted.start, accounted.end, accounted.nodes
        elif queued is not None:
            state, code, signal, reason = map_state(queued.state, "", queued.reason)
            start, end, node = queued.start, queued.end, queued.nodes
            if from_sacct and state not in _ACTIVE:
                state, reason = "RUNNING", f"{queued.state} in squeue; waiting for sacct to record it"
        else:
            result[job_id] = JobInfo("LOST", "neither squeue nor sacct knows this job", None, None, None, None, None)
            continue
        if (ending := own_ending(sacct_rows, job_id, state)) is not None:
            state, code, reason = ending
            signal = None
        elif state in STEPS_CHECKED and (steps := oom_steps(sacct_rows, job_id)):
            then = "; the job was cancelled afterwards" if state == "CANCELLED" else ""
            state, reason = "OUT_OF_MEMORY", f"step {steps[0]} ran out of memory{then}"
        if state == "PENDING":  # squeue's %S/%e are estimates until the job starts
            start, end, node = None, None, None
        elif state in _ACTIVE:
            end = None
        result[job_id] = JobInfo(state, reason, code, signal, start, end, node)
    return result
