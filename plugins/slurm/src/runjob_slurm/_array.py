"""Many jobs of one resource shape as one SLURM job array (a sweep's elements, issue 26).

Each element keeps its own runjob job: its own rendered script, folder, log and tag. The
array's script only dispatches: task ``i`` changes to element ``i``'s folder and runs its
script, appending to its log. The elements' ``#SBATCH`` resource lines are the array's (they
are the same for every element of a shape; otherwise no array is made). Each element's folder
gets ``slurm-array-<attempt>.json`` (the array's comment and the element's task) before the
array is submitted, so that a runjob killed between ``sbatch`` and recording finds the task
of each element by its attempt alone (:func:`find_task`).
"""

from __future__ import annotations

import json
import posixpath
import shlex

from runjob_core.errors import BackendError
from runjob_slurm import _parse

SOURCE = "runjob-slurm"
#: #SBATCH options that name one job: the array sets its own.
_PER_JOB = ("--job-name", "--output", "--comment", "--open-mode", "--array")


def marker_path(attempt) -> str:
    return f"{attempt.layout.job_dir}/slurm-array-{attempt.n}.json"


def _resources(script: str) -> list[str]:
    return [line for line in script.splitlines()
            if line.startswith("#SBATCH") and not line.split()[1].split("=")[0] in _PER_JOB]


def render(jobs, attempts, rendereds, name: str, resources: list[str], comment: str, max_parallel: int) -> str:
    n = len(jobs)
    bound = f"%{max_parallel}" if max_parallel < n else ""
    first = attempts[0].layout.job_dir
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name if _parse_safe(name) else 'runjob-array'}", f"#SBATCH --array=0-{n - 1}{bound}",
             f"#SBATCH --output={first}/array-%A_%a.out", f"#SBATCH --comment={comment}", *resources,
             "# Rendered by runjob: one task per sweep element; task i runs element i's own script in its own folder.",
             'case "${SLURM_ARRAY_TASK_ID:-}" in']
    for i, (attempt, rendered) in enumerate(zip(attempts, rendereds)):
        layout = attempt.layout
        script = layout.script_path or f"{layout.job_dir}/{rendered.script_name}"
        lines.append(f"  {i}) cd {shlex.quote(layout.job_dir)} && exec bash {shlex.quote(script)} "
                     f">> {shlex.quote(layout.log_path)} 2>&1 ;;")
    lines += ["esac", 'echo "runjob: array task ${SLURM_ARRAY_TASK_ID:-?} runs no element" >&2', "exit 2", ""]
    return "\n".join(lines)


def submit(jobs, attempts, rendereds, name: str, cluster, transport, max_parallel: int):
    """One ``sbatch --array=0-N%K``; one Submission per element (``ARRAYID_TASK``). None when
    the elements' resource lines differ (the core then submits them one by one)."""
    resources = [_resources(r.script) for r in rendereds]
    if any(r != resources[0] for r in resources):
        return None
    first = attempts[0]
    for attempt in attempts:
        if not _parse_safe(attempt.layout.job_dir) or not _parse_safe(attempt.layout.log_path):
            return None  # a path sbatch would split: each element alone (its own checks apply)
    comment = f"runjob-array:{first.tag}"
    script_path = f"{first.layout.job_dir}/array-{first.n}.sh"
    # The markers and the array's script in one put_tree, rooted where the elements' folders
    # meet; a transport that holds it back (the core's submit) sends it with the sbatch below.
    root = posixpath.commonpath([attempt.layout.job_dir for attempt in attempts])
    files = {posixpath.relpath(marker_path(attempt), root): (json.dumps({"comment": comment, "task": i, "script": script_path}), 0o644)
             for i, attempt in enumerate(attempts)}
    files[posixpath.relpath(script_path, root)] = (render(jobs, attempts, rendereds, name, resources[0], comment, max_parallel), 0o755)
    transport.put_tree(root, files)
    result = transport.run(["sbatch", "--parsable", "--chdir", first.layout.job_dir, script_path], idempotent=False)
    if not result.ok:
        from runjob_slurm._backend import _explain_rejection

        raise BackendError(_explain_rejection(transport, cluster, jobs[0], script_path, result.stderr or result.stdout))
    array_id = _parse.parse_sbatch_parsable(result.stdout)
    return [attempt.submission(backend="slurm", cluster=cluster.name, backend_job_id=f"{array_id}_{i}", source=SOURCE,
                               extra={"script": attempt.layout.script_path or "", "array_id": array_id,
                                      "array_task": str(i), "array_size": str(len(attempts))})
            for i, attempt in enumerate(attempts)]


def _parse_safe(path: str) -> bool:
    from runjob_slurm._render import _SBATCH_SAFE

    return bool(_SBATCH_SAFE.match(path))


def find_task(transport, attempt, squeue_rows: dict, sacct_text) -> str | None:
    """``ARRAYID_TASK`` of an attempt that went out in an array (its marker says which), in the
    queue by the array's comment, else in accounting by the array's script; None if it never
    went out (or was not in an array)."""
    text = transport.read_text(marker_path(attempt))
    if not text:
        return None
    marker = json.loads(text)
    suffix = f"_{marker['task']}"
    for row in squeue_rows.values():
        if row.comment == marker["comment"] and row.job_id.endswith(suffix):
            return row.job_id
    return _parse.find_array_task(sacct_text(), marker["script"], marker["task"])


# A pending array task that is cancelled is taken out of the array's pending record: squeue
# stops listing it and sacct never gets a row of it. The cancel leaves a file in the element's
# folder saying so, which a later poll (any process) reads for a task neither knows.


def _cancel_marker(submission) -> str:
    return f"{submission.job_dir}/slurm-cancelled-{submission.attempt}"


def pending_tasks(transport, user: str, submissions) -> list:
    queue = transport.run(_parse.squeue_poll_argv(user))
    if not queue.ok:
        return []
    rows = _parse.parse_squeue(queue.stdout, wanted=[s.backend_job_id for s in submissions])
    return [s for s in submissions if s.backend_job_id in rows and rows[s.backend_job_id].state == "PENDING"]


def mark_cancelled(transport, submissions) -> None:
    import time

    for submission in submissions:
        transport.put_text(_cancel_marker(submission), f"{time.time()}\n")


def cancelled_while_pending(transport, submission):
    """CANCELLED for an array task cancelled before it started (its marker), else None."""
    from runjob_core.models import JobStatus

    text = transport.read_text(_cancel_marker(submission))
    if not text:
        return None
    try:
        ended = float(text.strip())
    except ValueError:
        ended = None
    return JobStatus(state="CANCELLED", source=SOURCE, reason="cancelled before it started (a pending array task)",
                     ended_at=ended)
