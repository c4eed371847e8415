"""Submit, poll, cancel, reattach and collect SLURM jobs over the cluster's transport.

Polling is batched: one ``squeue -u USER`` (live jobs) for every job of the cluster per
cycle, and one ``sacct`` (chunked) only for jobs that have left the queue or finished.
"""

from __future__ import annotations

import time
from pathlib import Path

from runjob_core.errors import BackendError, RunjobError, TransportError
from runjob_core.config import format_slurm_time, parse_duration
from runjob_core.models import Artifact, CheckResult, Estimate, JobStatus, Submission, TaggedJob
from runjob_slurm import _diagnose, _options, _parse

SOURCE = "runjob-slurm"
#: A job that neither squeue nor sacct knows is LOST only after this long (sacct lags).
SACCT_GRACE_SECONDS = 120


def _user(transport, cluster, context) -> str:
    pad = context.scratchpad(SOURCE)
    key = ("user", cluster.name)
    if key not in pad:
        if cluster.user:
            pad[key] = cluster.user
        else:
            result = transport.run(["whoami"])
            pad[key] = result.stdout.strip()
    return pad[key]


def submit(job, attempt, rendered, cluster, transport) -> Submission:
    script = attempt.layout.script_path or f"{attempt.layout.job_dir}/{rendered.script_name}"
    argv = ["sbatch", "--parsable", "--chdir", attempt.layout.job_dir, script]
    result = transport.run(argv, idempotent=False)
    if not result.ok:
        raise BackendError(_explain_rejection(transport, cluster, job, script, result.stderr or result.stdout))
    job_id = _parse.parse_sbatch_parsable(result.stdout)
    return attempt.submission(backend="slurm", cluster=cluster.name, backend_job_id=job_id, source=SOURCE,
                              extra={"script": script})


def _explain_rejection(transport, cluster, job, script: str, stderr: str) -> str:
    test = transport.run(["sbatch", "--test-only", "--chdir", script.rsplit("/", 1)[0], script])
    partitions = _parse.parse_partitions(transport.run(_parse.partitions_argv()).stdout)
    user = cluster.user or transport.run(["whoami"]).stdout.strip()
    accounts = _diagnose.parse_accounts(transport.run(_diagnose.accounts_argv(user)).stdout)
    requested = {
        "partition": _options.of(cluster).partition(job),
        "account": _options.of(cluster).account(job),
        "qos": job.resources.qos, "time": job.resources.time, "mem": job.resources.mem, "cpus": job.resources.cpus,
        "gpus": job.resources.gpus, "gpu_type": job.resources.gpu_type or cluster.gpu_type,
    }
    return _diagnose.diagnose(stderr, test.stderr, cluster_name=cluster.name, partitions=partitions,
                              accounts=accounts, requested=requested)


def poll(submissions, cluster, context) -> dict[str, JobStatus]:
    if not submissions:
        return {}
    transport = context.transport(cluster)
    user = _user(transport, cluster, context)
    ids = [s.backend_job_id for s in submissions]
    queue = transport.run(_parse.squeue_poll_argv(user, ids))
    if not queue.ok:
        # slurmctld busy or restarting: the monitor retries next cycle.
        raise TransportError(f"squeue failed on {cluster.name} (exit {queue.returncode}): {queue.stderr.strip()}")
    lines = _parse.squeue_lines(queue.stdout, wanted=ids)
    # A live job's status is a function of its squeue line alone, and a waiting job's line
    # is the same cycle after cycle: reuse last cycle's status for an unchanged line.
    memo = context.scratchpad(f"{SOURCE}:live-lines")
    last = memo.get(cluster.name, {})
    statuses = {job_id: last[line] for job_id, line in lines.items() if line in last}
    fresh = [job_id for job_id in ids if job_id not in statuses]
    queued = _parse.parse_squeue_lines([lines[job_id] for job_id in fresh if job_id in lines])
    gone = _parse.needs_sacct(fresh, queued)
    if not fresh:
        return statuses  # every line as last cycle: the memo stays as it is
    statuses.update(_statuses(transport, submissions, fresh, queued, gone))
    live = set(lines) - set(gone)
    memo[cluster.name] = {lines[job_id]: statuses[job_id] for job_id in live}
    return statuses


def _statuses(transport, submissions, ids: list[str], queued: dict, gone: list[str]) -> dict[str, JobStatus]:
    accounted = {}
    # sacct only for jobs that left the queue or just finished (squeue has no exit codes).
    for argv in _parse.sacct_argv(gone):
        result = transport.run(argv)
        if result.ok:
            accounted.update(_parse.parse_sacct(result.stdout))
    merged = _parse.merge(ids, queued, accounted)
    # A step killed for memory can leave the job FAILED 1:0, or CANCELLED when runjob stopped
    # it for the kill: look at the steps of such jobs, once, when they end.
    ended_badly = [job_id for job_id, info in merged.items() if info.state in _parse.STEPS_CHECKED]
    for job_id in ended_badly:
        steps = transport.run(_parse.sacct_steps_argv(job_id))
        if steps.ok:
            accounted.update(_parse.parse_sacct(steps.stdout))
    if ended_badly:
        merged = _parse.merge(ids, queued, accounted)
    statuses = {}
    submitted = {s.backend_job_id: s.submitted_at for s in submissions}
    hints: dict[tuple, str | None] = {}  # hundreds of jobs wait for the same reason in the same partition
    by_id = {s.backend_job_id: s for s in submissions}
    for job_id, info in merged.items():
        if info.state == "LOST" and "_" in job_id:
            from runjob_slurm import _array

            cancelled = _array.cancelled_while_pending(transport, by_id[job_id])
            if cancelled is not None:
                statuses[job_id] = cancelled
                continue
        if info.state == "LOST" and time.time() - submitted[job_id] < SACCT_GRACE_SECONDS:
            # Left squeue before slurmdbd recorded it (that can take seconds): not lost yet.
            statuses[job_id] = JobStatus(state="RUNNING", source=SOURCE, reason="finishing; waiting for accounting to record it")
            continue
        reason = info.reason
        hint = None
        if info.state == "PENDING" and reason:
            row = queued.get(job_id)
            key = (reason, row.partition if row else None)
            if key not in hints:
                hints[key] = _diagnose.diagnose_pending(reason, requested={"partition": key[1]} if row else None)
            hint = hints[key]
        statuses[job_id] = JobStatus(state=info.state, source=SOURCE, reason=hint or reason, exit_code=info.exit_code,
                                     signal=info.signal, started_at=info.started, ended_at=info.ended, node=info.node)
    return statuses


#: Asking the scheduler during a reattach: tries and the pause between them. A scheduler
#: that cannot be asked is never taken for "the job is not there" (that would submit twice).
REATTACH_TRIES = 5
REATTACH_PAUSE = 3.0


def reattach(attempt, cluster, context) -> Submission | None:
    """The job submitted for *tag* before runjob was stopped: in the queue by its comment,
    else in accounting (a job that ended and left squeue after MinJobAge) by its name and
    its attempt's own script, within the attempt's time window."""
    tag = attempt.tag
    transport = context.transport(cluster)
    user = _user(transport, cluster, context)
    queue = _ask(transport, cluster, _parse.squeue_argv(user))
    rows = _parse.parse_squeue(queue)
    job_id = _parse.find_by_comment(rows, tag)
    if job_id is None:  # an element of a job array (runjob_slurm._array): found by the array's index
        from runjob_slurm import _array

        since = _parse.attempt_window_start(attempt.job_id)
        job_id = _array.find_task(transport, attempt, rows,
                                  lambda: _ask(transport, cluster, _parse.sacct_reattach_argv(user, since)))
    if job_id is None:
        job_id = _find_in_accounting(transport, cluster, user, attempt)
    if job_id is None:
        return None
    return attempt.submission(backend="slurm", cluster=cluster.name, backend_job_id=job_id, source=SOURCE,
                              extra={"script": attempt.layout.script_path, "reattached": "1"})


def list_tagged(cluster, context) -> list[TaggedJob]:
    """Every live job of the cluster's user carrying a runjob tag (one squeue), with its folder."""
    result = context.transport(cluster).run(_parse.squeue_tagged_argv())
    if not result.ok:
        raise TransportError(f"squeue failed on {cluster.name} (exit {result.returncode}): {result.stderr.strip()}")
    return [TaggedJob(tag=tag, backend_job_id=job_id, state=state, source=SOURCE, job_dir=folder)
            for job_id, state, folder, tag in _parse.parse_tagged(result.stdout)]


def _ask(transport, cluster, argv: list[str]) -> str:
    for tries in range(1, REATTACH_TRIES + 1):
        result = transport.run(argv)
        if result.ok:
            return result.stdout
        if tries < REATTACH_TRIES:
            time.sleep(REATTACH_PAUSE)
    raise TransportError(f"cannot ask SLURM on {cluster.name} whether the job was already submitted ({argv[0] if argv[0] != 'env' else argv[2]} "
                         f"exit {result.returncode}: {result.stderr.strip()}); nothing was submitted: run the same command "
                         "again when the scheduler answers")


def _find_in_accounting(transport, cluster, user: str, attempt) -> str | None:
    since = _parse.attempt_window_start(attempt.job_id)
    stdout = _ask(transport, cluster, _parse.sacct_reattach_argv(user, since))
    return _parse.find_by_script(stdout, attempt.layout.script_path)


def cancel(submissions, cluster, context) -> list[str]:
    transport = context.transport(cluster)
    ids = [s.backend_job_id for s in submissions]
    tasks = [s for s in submissions if "_" in s.backend_job_id]
    pending = []
    if tasks:  # an array task cancelled before it started leaves no trace in squeue or sacct: mark it
        from runjob_slurm import _array

        pending = _array.pending_tasks(transport, _user(transport, cluster, context), tasks)
    result = transport.run(["scancel", *ids])
    if not result.ok and "Invalid job id" not in result.stderr:
        raise BackendError(f"scancel failed on {cluster.name}: {result.stderr.strip()}")
    if pending:
        _array.mark_cancelled(transport, pending)
    return ids


def collect(submission: Submission, dest: Path, context, job=None) -> list[Artifact]:
    """Download the job's results folder into *dest*, only files that changed (every file
    lands inside *dest* or is skipped with a finding: :mod:`runjob_core.collecting`); add
    what the job measured (``memory`` artifact) when its log or sacct says."""
    from runjob_core import collecting

    cluster = context.clusters[submission.cluster]
    transport = context.transport(cluster)
    remote = transport.listdir_recursive(submission.results_dir)
    copied, rows, kept, problems = 0, 0, [], []
    for info in remote:
        target, why = collecting.destination(dest, info.path)
        if target is None:
            problems.append(collecting.skipped(info.path, why, SOURCE))
            continue
        if not (target.exists() and target.stat().st_size == info.size and int(target.stat().st_mtime) >= int(info.mtime)):
            try:
                transport.get_file(f"{submission.results_dir.rstrip('/')}/{info.path}", target)
            except (OSError, RunjobError) as exc:
                problems.append(collecting.skipped(info.path, f"could not be downloaded ({exc})", SOURCE))
                continue
            copied += 1
        kept.append(info.path)
        rows += collecting.count_rows(target)
    memory = measured_memory(submission, cluster, transport, job or context.store.get_job(submission.job_id).spec)
    if not kept:
        return [*problems, memory] if memory else problems
    results = Artifact(name="results", kind="results", location=str(dest), source=SOURCE, rows=rows,
                       data={"files": kept, "copied": copied, "from": f"{cluster.name}:{submission.results_dir}"})
    return [results, *problems, memory] if memory else [results, *problems]


def measured_memory(submission: Submission, cluster, transport, job) -> Artifact | None:
    """What the job really used: sacct's MaxRSS of its steps and the GPU peak its log
    reports, next to the estimate of its spec (runjob_core.estimator.measured)."""
    from runjob_core.estimator import measured

    accounted = transport.run(_parse.sacct_maxrss_argv(submission.backend_job_id))
    rss = _parse.max_rss_field(accounted.stdout) if accounted.ok else None
    log = transport.read_text(submission.log_path) or ""
    return measured.memory_artifact(job, cluster, log, rss, SOURCE)


def check_cluster(cluster, transport) -> list[CheckResult]:
    rows = []
    user = cluster.user or transport.run(["whoami"]).stdout.strip()
    queue = transport.run(_parse.squeue_argv(user))
    rows.append(CheckResult("squeue -u $USER", queue.ok, queue.stderr.strip() or f"{len(queue.stdout.splitlines())} jobs listed",
                            SOURCE, None if queue.ok else "SLURM commands are not on PATH, or slurmctld is down"))
    partitions = _parse.parse_partitions(transport.run(_parse.partitions_argv()).stdout)
    names = [p.name for p in partitions]
    options = _options.of(cluster)
    if options.default_partition:
        ok = options.default_partition in names
        rows.append(CheckResult("partition", ok, f"{options.default_partition!r}; partitions: {', '.join(names)}", SOURCE,
                                None if ok else f"set default_partition to one of: {', '.join(names)}"))
    if options.default_account:
        accounts = _diagnose.parse_accounts(transport.run(_diagnose.accounts_argv(user)).stdout)
        ok = options.default_account in accounts
        rows.append(CheckResult("account", ok, f"{options.default_account!r}; your accounts: {', '.join(accounts) or 'none'}",
                                SOURCE, None if ok else f"set default_account to one of: {', '.join(accounts)}"))
    return rows


#: Partition limits change rarely: pre-flight reuses what sinfo said this long ago.
PARTITIONS_CACHE_SECONDS = 600


def _partitions(cluster, context) -> list:
    cache = context.state_dir / "cache" / f"slurm-partitions-{cluster.name}.txt"
    try:
        if time.time() - cache.stat().st_mtime < PARTITIONS_CACHE_SECONDS:
            return _parse.parse_partitions(cache.read_text())
    except FileNotFoundError:
        pass
    result = context.transport(cluster).run(_parse.partitions_argv())
    if not result.ok:
        return []
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(result.stdout)
    return _parse.parse_partitions(result.stdout)


def check_partition_limits(job, cluster, context) -> Estimate | None:
    """Pre-flight: the partition exists and allows the requested time (one ``sinfo``)."""
    partitions = _partitions(cluster, context)
    if not partitions:
        return None
    wanted = _options.of(cluster).partition(job)
    by_name = {p.name: p for p in partitions}
    if wanted is None:
        wanted = next((p.name for p in partitions if p.default), None)
    names = ", ".join(by_name)
    if wanted not in by_name:
        return Estimate(source=SOURCE, summary=f"partition {wanted!r} does not exist on {cluster.name}", fits=False,
                        suggestions=(f"set resources.partition to one of: {names}",))
    limit = by_name[wanted].max_time
    if job.resources.time and limit is not None and parse_duration(job.resources.time) > limit:
        longer = [p.name for p in partitions if p.max_time is None or p.max_time >= parse_duration(job.resources.time)]
        hint = f"or use partition {', '.join(longer)}" if longer else "and checkpoint so that runjob resumes it"
        return Estimate(
            source=SOURCE, fits=False,
            summary=f"time {job.resources.time} is over partition {wanted!r}'s limit {format_slurm_time(limit)} on {cluster.name}",
            suggestions=(f"ask for resources.time <= {format_slurm_time(limit)} {hint}",),
        )
    if limit is None or job.resources.time:
        return None
    # No time asked for: the partition's MaxTime is the limit (the core's time estimate counts
    # the resume segments against it).
    return Estimate(source=SOURCE, fits=None, data={"partition_max_seconds": limit},
                    summary=f"no resources.time: partition {wanted!r} allows up to {format_slurm_time(limit)}")
