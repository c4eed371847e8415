"""Many jobs of one resource shape as one SLURM job array (a sweep's elements, issue 26).

Each element keeps its own runjob job: its own rendered script, folder, log and tag. The
array's script only dispatches, and is the same size for 2 elements or 10,000: task ``i``
reads element ``i``'s line of the array's *index* (its id, folder, script, log and its byte
range of the *bundle*), makes the element's folder, unpacks the element's files into it from
the bundle, changes to it and runs its script, appending to its log. The bundle is one file
of tar members, the job-side library first and then each element's files: a 1,000-element
sweep writes three files at submit (script, index, bundle), not 1,000 folders of 8 files,
and a task reads only its own range. The elements' ``#SBATCH`` resource lines are the
array's (they are the same for every element of a shape; otherwise no array is made).

The array's folder (:func:`array_dir`) is named by its first element's attempt, which its
comment (``runjob-array:<first tag>``) names too: a runjob killed between ``sbatch`` and
recording finds each element's task by its attempt alone, in the index (:func:`find_task`).
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time

from runjob_core.errors import BackendError
from runjob_slurm import _parse

SOURCE = "runjob-slurm"
#: #SBATCH options that name one job: the array sets its own.
_PER_JOB = ("--job-name", "--output", "--comment", "--open-mode", "--array")
#: What a task exits with when its element's files cannot be unpacked (as the job script
#: exits when it cannot enter its work folder).
CANNOT_UNPACK = 97


#: How far apart (seconds) the ids of one array's elements may have been made: they are all
#: recorded by one submit.
_SAME_SUBMIT = 3600


def _marker_in_job_dir(attempt) -> str:
    """Where arrays submitted before the bundle kept an element's marker (its own folder)."""
    return f"{attempt.layout.job_dir}/slurm-array-{attempt.n}.json"


def array_dir(first) -> str:
    """The array's own folder (script, bundle, index, the tasks' own output), named by its
    first element's attempt."""
    return _array_dir(first.layout.scratch, first.job_id, first.n)


def _array_dir(scratch: str, job_id: str, n) -> str:
    return f"{scratch}/arrays/{job_id}.{n}"


def _resources(script: str) -> list[str]:
    """The script's ``#SBATCH`` lines that are not per job. sbatch reads them only up to the
    first line that is neither a comment nor blank, and so does this (not all ~70 lines)."""
    # The head of the script first, cut after a newline (the same lines as the whole script's
    # up to there): its ~4 KB were split whole for each of 1,000 elements (~8 ms).
    head = script[:script.rfind("\n", 0, 2048) + 1]
    for text in (head, script):
        found = []
        for line in text.splitlines():
            if line.startswith("#SBATCH"):
                if line.split()[1].split("=")[0] not in _PER_JOB:
                    found.append(line)
            elif line.strip() and not line.startswith("#"):
                return found
    return found


def index_lines(attempts, rendereds, ranges: list[tuple[int, int]] | None, names: list[str] | None = None) -> str:
    """The array's index: line i is task i's element, ``<job id>.<attempt> <at> <size> <folder>
    <script> <log>`` (*at*, *size*: its range of the bundle; ``-`` when its folder was written at
    submit), then its job name when the task makes its script from the array's model (*names*).
    Every path is one word: :func:`submit` takes none that sbatch would split."""
    lines = []
    for i, (attempt, rendered) in enumerate(zip(attempts, rendereds)):
        layout = attempt.layout
        at, size = ranges[i] if ranges is not None else ("-", "-")
        script = layout.script_path or f"{layout.job_dir}/{rendered.script_name}"
        name = f" {names[i]}" if names is not None else ""
        lines.append(f"{attempt.job_id}.{attempt.n} {at} {size} {layout.job_dir} {script} {layout.log_path}{name}\n")
    return "".join(lines)


def render(n: int, first, name: str, resources: list[str], comment: str, max_parallel: int, library: int,
           script_model=None) -> str:
    """The array's script, the same size whatever *n*: task i reads its element from line i+1
    of the array's index, makes the element's folder, unpacks its files there from the bundle
    (the first *library* bytes, runjob's job-side library, then the element's own range of tar
    members, then the two empty blocks that end an archive) unless they were written at
    submit, makes its script from the array's *script_model* (``model.sh``) when it has one,
    and runs its script there, appending to its log."""
    folder = array_dir(first)
    bound = f"%{max_parallel}" if max_parallel < n else ""
    # The model's stand-ins are letters, digits and "-", the names and ids put in letters,
    # digits, ".", "_" and "-" (ScriptModel): nothing sed reads as a pattern or replacement.
    make_script = ("" if script_model is None else
                   f'&& sed -e "s#{script_model.id_in}#${{e%.*}}#g" -e "s#{script_model.name_in}#$n#g" '
                   '"$runjob_model" > "$s" && chmod 755 "$s" ')
    return "\n".join([
        "#!/bin/bash", f"#SBATCH --job-name={name if _parse_safe(name) else 'runjob-array'}", f"#SBATCH --array=0-{n - 1}{bound}",
        f"#SBATCH --output={folder}/array-%A_%a.out", f"#SBATCH --comment={comment}", *resources,
        "# Rendered by runjob: one task per sweep element; task i runs element i's own script in its own folder,",
        "# as line i+1 of the index says (its id, its range of the bundle, its folder, script, log and name).",
        f"runjob_index={shlex.quote(folder + '/index')} runjob_bundle={shlex.quote(folder + '/bundle.tar')} "
        f"runjob_model={shlex.quote(folder + '/model.sh')}",
        'case "${SLURM_ARRAY_TASK_ID:-x}" in *[!0-9]*) echo "runjob: not an array task" >&2; exit 2 ;; esac',
        'read -r e at size d s l n < <(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" "$runjob_index")',
        'if [ -z "$l" ]; then echo "runjob: array task $SLURM_ARRAY_TASK_ID runs no element" >&2; exit 2; fi',
        'if [ "$at" != - ]; then',
        f'  mkdir -p "$d" && [ -r "$runjob_bundle" ] && {{ head -c {library} "$runjob_bundle"; '
        'tail -c +$((at + 1)) "$runjob_bundle" | head -c "$size"; head -c 1024 /dev/zero; } | tar -x -m -f - -C "$d" '
        f'{make_script}&& [ -f "$s" ] || {{',
        '    echo "[runjob] cannot unpack this element\'s files from $runjob_bundle into $d" | tee -a "$l" >&2',
        f"    exit {CANNOT_UNPACK}", "  }", "fi",
        'cd "$d" && exec bash "$s" >> "$l" 2>&1', ""])


def bundle_of(folders: list[dict], common: dict) -> tuple[bytes, int, list[tuple[int, int]]] | None:
    """The array's bundle: *common*'s files as tar members, then each folder's; with the
    size of the first part and each folder's (offset, size). None when a path does not fit a
    tar header (the folders are then written at submit)."""
    from runjob_core.transport import tree

    now = int(time.time())
    library = tree.members(common, now)
    if library is None:
        return None
    parts, ranges, at = [library], [], len(library)
    for files in folders:
        part = tree.members(files, now)
        if part is None:
            return None
        parts.append(part)
        ranges.append((at, len(part)))
        at += len(part)
    return b"".join(parts), len(library), ranges


def submit(jobs, attempts, rendereds, name: str, cluster, transport, max_parallel: int, folders=None, common_files=None,
           script_model=None):
    """One ``sbatch --array=0-N%K``; one Submission per element (``ARRAYID_TASK``). None when
    the elements' resource lines differ (the core then submits them one by one). With
    *folders* (each element's files), they go in the array's bundle, unpacked by each task;
    with *script_model* too, the folders hold no script and each task makes its own from the
    model (shipped once as ``model.sh``)."""
    shared = _resources(script_model.text) if script_model is not None else None
    if shared is not None and not any(script_model.name_in in line or script_model.id_in in line for line in shared):
        resources = [shared]  # every element's: its scripts are the model with a name and id put in
    else:
        resources = [_resources(r.script) for r in rendereds]
        if any(r != resources[0] for r in resources):
            return None
    first = attempts[0]
    for attempt, rendered in zip(attempts, rendereds):
        layout = attempt.layout
        if not all(map(_parse_safe, (layout.job_dir, layout.log_path, layout.script_path or rendered.script_name))):
            return None  # a path sbatch would split: each element alone (its own checks apply)
    comment = f"runjob-array:{first.tag}"
    folder = array_dir(first)
    script_path = f"{folder}/array.sh"
    # The index, the bundle and the array's script in one put_tree rooted at the scratch
    # folder; a transport that holds it back (the core's submit) sends it with the sbatch below.
    root = first.layout.scratch
    bundle = bundle_of(folders, common_files or {}) if folders is not None else None
    files = {}
    if folders is not None and bundle is None:  # a path no tar header holds: the folders now, as the core would
        for attempt, own, rendered in zip(attempts, folders, rendereds):
            prefix = posixpath.relpath(attempt.layout.job_dir, root)
            script = {rendered.script_name: (rendered.script, 0o755)} if script_model is not None else {}
            files.update({f"{prefix}/{rel}": entry for rel, entry in {**own, **script, **(common_files or {})}.items()})
    modelled = script_model if bundle is not None else None  # each task makes its script from the model
    if bundle is not None:
        files[posixpath.relpath(f"{folder}/bundle.tar", root)] = (bundle[0], 0o644)
    if modelled is not None:
        files[posixpath.relpath(f"{folder}/model.sh", root)] = (modelled.text, 0o644)
    names = [job.name for job in jobs] if modelled is not None else None
    files[posixpath.relpath(f"{folder}/index", root)] = (index_lines(attempts, rendereds, bundle and bundle[2], names), 0o644)
    files[posixpath.relpath(script_path, root)] = (render(len(attempts), first, name, resources[0], comment, max_parallel,
                                                          bundle[1] if bundle else 0, modelled), 0o755)
    logs = tuple(dict.fromkeys(attempt.layout.log_path.rsplit("/", 1)[0] for attempt in attempts))
    transport.put_tree(root, files, also_make=logs)
    result = transport.run(["sbatch", "--parsable", "--chdir", folder, script_path], idempotent=False)
    if not result.ok:
        from runjob_slurm._backend import _explain_rejection

        raise BackendError(_explain_rejection(transport, cluster, jobs[0], script_path, result.stderr or result.stdout))
    array_id = _parse.parse_sbatch_parsable(result.stdout)
    return [attempt.submission(backend="slurm", cluster=cluster.name, backend_job_id=f"{array_id}_{i}", source=SOURCE,
                               extra={"script": attempt.layout.script_path or "", "array_id": array_id,
                                      "array_task": str(i), "array_size": str(len(attempts))})
            for i, attempt in enumerate(attempts)]


def _parse_safe(path: str) -> bool:
    return bool(_parse.SBATCH_SAFE.match(path))


def find_task(transport, attempt, squeue_rows: dict, sacct_text) -> str | None:
    """``ARRAYID_TASK`` of an attempt that went out in an array, or None if it never went out
    (or not in an array): in the queue among the arrays whose comment names a first element
    recorded by the same submit and whose index lists the attempt, else in accounting by the
    array's script. An array submitted before the index (a marker in each element's folder)
    is found by that marker."""
    text = transport.read_text(_marker_in_job_dir(attempt))
    if text:
        marker = json.loads(text)
        for row in squeue_rows.values():
            if row.comment == marker["comment"] and row.job_id.endswith(f"_{marker['task']}"):
                return row.job_id
        return _parse.find_array_task(sacct_text(), marker["script"], marker["task"])
    me, scratch = f"{attempt.job_id}.{attempt.n}", attempt.layout.scratch
    queued: dict[tuple[str, str], list] = {}  # each queued array's first element (job id, attempt) -> its rows
    for row in squeue_rows.values():
        if (row.comment or "").startswith("runjob-array:"):
            first = _first_of(row.comment.removeprefix("runjob-array:"))
            if first is not None:
                queued.setdefault(first, []).append(row)
    for first, rows in queued.items():
        task = _task_of(transport, scratch, first, me, attempt.job_id)
        if task is not None:
            found = [row.job_id for row in rows if row.job_id.endswith(f"_{task}")]
            if found:
                return found[0]
            return _parse.find_array_task(sacct_text(), f"{_array_dir(scratch, *first)}/array.sh", task)  # it left the queue
    accounted = sacct_text()
    for script in _array_scripts(accounted, scratch):
        first_id, _, n = script.rsplit("/", 2)[1].rpartition(".")
        task = _task_of(transport, scratch, (first_id, n), me, attempt.job_id)
        if task is not None:
            return _parse.find_array_task(accounted, script, task)
    return None


def _first_of(tag: str) -> tuple[str, str] | None:
    """(job id, attempt) of a runjob tag ``runjob:<job id>:<attempt>``; None for anything else."""
    parts = tag.split(":")
    if len(parts) != 3 or parts[0] != "runjob" or not _parse_safe(parts[1]) or not parts[2].isdigit():
        return None
    return parts[1], parts[2]


def _task_of(transport, scratch: str, first: tuple[str, str], me: str, job_id: str) -> int | None:
    """Element *me*'s task in the array whose first element is *first* (job id, attempt), read
    from its index; None when it is not there. Arrays whose first element was not recorded by
    the same submit as *job_id* (ids more than an hour apart) are not read."""
    first_id, n = first
    if abs(_parse.attempt_window_start(first_id, 0) - _parse.attempt_window_start(job_id, 0)) > _SAME_SUBMIT:
        return None
    text = transport.read_text(f"{_array_dir(scratch, first_id, n)}/index") or ""
    ids = [line.split(" ", 1)[0] for line in text.splitlines()]
    return ids.index(me) if me in ids else None


def _array_scripts(sacct_output: str, scratch: str) -> list[str]:
    """The scripts of the arrays under *scratch* in ``sacct_reattach_argv`` output, newest first."""
    found: dict[str, int] = {}
    prefix = f"{scratch}/arrays/"
    for line in sacct_output.splitlines():
        job_id, _, rest = line.partition("|")
        submit_line = rest.partition("|")[2].strip()
        script = submit_line.rsplit(" ", 1)[-1]
        array_id = job_id.partition("_")[0]
        if script.startswith(prefix) and script.endswith("/array.sh") and array_id.isdigit():
            found[script] = max(found.get(script, 0), int(array_id))
    return sorted(found, key=found.get, reverse=True)


# A pending array task that is cancelled is taken out of the array's pending record: squeue
# stops listing it and sacct never gets a row of it. The cancel leaves a file in the element's
# folder saying so, which a later poll (any process) reads for a task neither knows.


def _cancel_marker_name(submission) -> str:
    return f"slurm-cancelled-{submission.attempt}"


def _cancel_marker(submission) -> str:
    return f"{submission.job_dir}/{_cancel_marker_name(submission)}"


def pending_tasks(transport, user: str, submissions) -> list:
    queue = transport.run(_parse.squeue_poll_argv(user))
    if not queue.ok:
        return []
    rows = _parse.parse_squeue(queue.stdout, wanted=[s.backend_job_id for s in submissions])
    return [s for s in submissions if s.backend_job_id in rows and rows[s.backend_job_id].state == "PENDING"]


def mark_cancelled(transport, submissions) -> None:
    for submission in submissions:  # its folder is made when its task starts: maybe never
        transport.put_tree(submission.job_dir, {_cancel_marker_name(submission): (f"{time.time()}\n", 0o644)})


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
