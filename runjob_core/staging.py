"""Where a job's files live on its cluster, and putting them there before submitting.

Layout on the cluster (``<scratch>`` is the cluster's ``scratch_path``; for the local
cluster ``.runjob/scratch``)::

    <scratch>/jobs/<name>/<runjob id>/  run.<attempt>.sh, params.json, runjob.json, progress.json, lib/, results/, checkpoints/,
                                        work/ (the synced workdir, remote clusters: cwd of the job) and
                                        work.sha256.json (what was uploaded to it)
    <scratch>/logs/<name>.<runjob id>.<attempt>.out
    <scratch>/cache/                    HF, torch, vLLM, pip caches

Each runjob job gets its own folder, so a fresh run never inherits old results or runs
another job's code, while the attempts of one job share it, so a resumed attempt continues
the same results with the same code. Each
attempt has its own script (``run.<attempt>.sh``) and log: a resubmission never overwrites
the script of a job still waiting in the queue. ``runjob.json`` is the job's own record
(id, name, kind, spec and its hash, the runjob folder that submitted it): a store that was
lost rebuilds the job from it (:mod:`runjob_core.adopt`).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.resources
import json
import os
import posixpath
from pathlib import Path

import attrs

from runjob_core.errors import RefusedError, RunjobError
from runjob_core.models import ClusterConfig, JobSpec, Layout, Rendered
from runjob_core.transport import LocalTransport, Transport

__all__ = ["JOB_RECORD", "Layout", "job_record", "layout_for", "stage", "sync_workdir", "unsynced_command_files"]

#: Refuse to upload a workdir larger than this without being told (data belongs elsewhere).
MAX_SYNC_BYTES = 512 << 20
#: The job's own record in its folder on the cluster (see the module's docstring).
JOB_RECORD = "runjob.json"
_ALWAYS_IGNORED = (".git", "__pycache__", "*.pyc", ".runjob", ".venv", "venv", "results", ".ipynb_checkpoints")


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/")] + [p.strip("/") for p in parts[1:]])


def _under(base: str, path: str) -> str:
    return path if path.startswith("/") else _join(base, path)


#: Home folder assumed on a machine that does not exist yet (a pod: containers run as root).
MACHINE_HOME = "/root"


def scratch_root(cluster: ClusterConfig, transport: Transport | None, state_dir: Path) -> str:
    """The folder jobs of *cluster* really keep their files under (``runjob clusters check``
    tests this one): ``scratch_path``; without it ``<state dir>/scratch`` on this machine,
    ``~/runjob`` on a cluster, and ``/root/runjob`` on a machine not created yet."""
    if transport is None:
        scratch = cluster.scratch_path or "~/runjob"
        if not scratch.startswith("/"):
            scratch = MACHINE_HOME + "/" + scratch.removeprefix("~").lstrip("/")
        return scratch
    if cluster.scratch_path:
        return transport.expand(cluster.scratch_path)
    if isinstance(transport, LocalTransport):
        return str((state_dir / "scratch").absolute())
    return transport.expand("~/runjob")


def layout_for(
    job: JobSpec, cluster: ClusterConfig, job_id: str, attempt: int, transport: Transport | None, state_dir: Path
) -> Layout:
    """Where attempt *attempt* of *job* keeps its files. *transport* is ``None`` for a
    machine that is not created yet: paths then come from ``scratch_path`` alone."""
    is_local = isinstance(transport, LocalTransport)
    scratch = scratch_root(cluster, transport, state_dir)
    job_dir = _join(scratch, "jobs", job.name, job_id)
    # Resolved only where it is used (a realpath per element of a 1,000-element sweep otherwise).
    if is_local:
        workdir, sync_from = str(Path(job.base_dir, job.workdir or ".").resolve()), None
    elif job.workdir:
        # Each job its own work copy: two jobs of one name never run each other's code.
        workdir, sync_from = _join(job_dir, "work"), str(Path(job.base_dir, job.workdir).resolve())
    else:
        workdir, sync_from = job_dir, None
    return Layout(
        scratch=scratch,
        job_dir=job_dir,
        workdir=workdir,
        sync_from=sync_from,
        results_dir=_under(job_dir, job.data.output),
        checkpoint_dir=_under(job_dir, job.checkpoint.dir),
        progress_path=_join(job_dir, "progress.json"),
        params_path=_join(job_dir, "params.json"),
        log_path=_join(scratch, "logs", f"{job.name}.{job_id}.{attempt}.out"),
        lib_dir=_join(job_dir, "lib"),
        cache_dir=_join(scratch, "cache"),
        script_path=_join(job_dir, f"run.{attempt}.sh"),
    )


def stage(transport: Transport, layout: Layout, job: JobSpec, rendered: Rendered, *,
          started_with: dict[str, str] | None = None, accept_changes: bool = False,
          record: str | None = None) -> dict[str, str] | None:
    """Create the job's folders and put the script, params, job-side library, the job's
    *record* (:func:`job_record`) and workdir in place. Returns the hashes of the workdir's
    files (None for a job without ``workdir:``).

    *started_with* (a resumed attempt) are the hashes its job started with: a workdir
    changed since is refused with the files named, unless *accept_changes* (``--force``),
    for jobs that run a synced copy (remote clusters); a local job runs the folder itself."""
    hashes = _code_hashes(layout, job, started_with, accept_changes)
    transport.put_tree(layout.job_dir, _folder_files(job, rendered, record), also_make=(layout.log_path.rsplit("/", 1)[0],))
    if layout.sync_from:
        sync_workdir(transport, Path(layout.sync_from), layout.workdir, hashes)
    return hashes


def stage_many(transport: Transport, staged: list[tuple[Layout, JobSpec, Rendered, str | None]], *,
               put_files: bool = True) -> list[dict[str, str] | None]:
    """:func:`stage` of many new jobs (a sweep's array: layout, job, rendered, record each):
    their folders' files with one ``put_tree``, rooted where their folders meet (one remote
    command instead of one per job; every folder gets the same job-side library, which the SSH
    transport's tar stream sends once and links the others to), then their workdirs synced one
    job at a time. Without *put_files* only the workdirs are synced (and hashed): the backend
    puts the folders' files in place itself (``runjob_submit_array``'s *folders*)."""
    hashes = [_code_hashes(layout, job, None, False) for layout, job, _r, _rec in staged]
    if put_files:
        root = posixpath.commonpath([layout.job_dir for layout, *_rest in staged])
        files, logs = {}, []
        for layout, job, rendered, record in staged:
            prefix = posixpath.relpath(layout.job_dir, root)
            files.update({posixpath.normpath(f"{prefix}/{rel}"): entry
                          for rel, entry in _folder_files(job, rendered, record).items()})
            logs.append(layout.log_path.rsplit("/", 1)[0])
        transport.put_tree(root, files, also_make=tuple(dict.fromkeys(logs)))
    for (layout, *_rest), code in zip(staged, hashes):
        if layout.sync_from:
            sync_workdir(transport, Path(layout.sync_from), layout.workdir, code)
    return hashes


def _code_hashes(layout: Layout, job: JobSpec, started_with: dict[str, str] | None,
                 accept_changes: bool) -> dict[str, str] | None:
    if not job.workdir:
        return None
    source = Path(layout.sync_from) if layout.sync_from else Path(job.base_dir, job.workdir).resolve()
    # A job on this machine runs in the folder itself, and writes there: what it wrote is
    # no code change. Only a synced work copy keeps the code its job started with.
    return check_code(source, job, started_with if layout.sync_from else None, accept_changes=accept_changes)


def _folder_files(job: JobSpec, rendered: Rendered, record: str | None) -> dict[str, tuple[str, int]]:
    return {**own_files(job, rendered, record), **job_side_files()}


def own_files(job: JobSpec, rendered: Rendered, record: str | None, *, script: bool = True) -> dict[str, tuple[str, int]]:
    """A job folder's files that are the job's own (relative path -> (text, mode)): its
    script (unless not *script*: a backend that makes it from a model), ``params.json``, the
    files its template made and its *record*; the job-side library (:func:`job_side_files`)
    is the same in every folder."""
    return {
        **({rendered.script_name: (rendered.script, 0o755)} if script else {}),
        "params.json": (params_json(job.params), 0o644),
        **{name: (text, 0o644) for name, text in rendered.files.items()},
        **({JOB_RECORD: (record, 0o600)} if record is not None else {}),
    }


def params_json(params: dict) -> str:
    """``params.json``: ``json.dumps(params, indent=2, sort_keys=True, default=str)`` and a
    newline. Params of plain values (a sweep's ``lr: 0.1``) are written line by line with the C
    encoder, the same text: an indent makes json use its pure-Python encoder (~6 us a job)."""
    if params and all(type(k) is str and (v is None or type(v) in (str, int, float, bool)) for k, v in params.items()):
        encode = json.JSONEncoder().encode
        return "{\n" + ",\n".join(f"  {encode(k)}: {encode(v)}" for k, v in sorted(params.items())) + "\n}\n"
    return json.dumps(params, indent=2, sort_keys=True, default=str) + "\n"


def job_record(row, state_dir: Path) -> str:
    """``runjob.json`` for the job of store row *row*: what adopting it needs if the store
    that submitted it is lost, and where that store was (only that folder adopts it)."""
    head = json.dumps({"job_id": row.id, "name": row.name, "kind": row.kind, "cluster": row.cluster,
                       "backend": row.backend, "spec_hash": row.spec_hash, "spec_path": row.spec_path,
                       **_submitted_from(str(state_dir)), "created_at": row.created_at}, sort_keys=True)
    # The spec is the store's JSON text, spliced in rather than parsed and written again
    # (a 1,000-element sweep spent 0.37 s on that). One line: an indent makes json use its
    # pure-Python encoder (~30 us a job, 30 ms of a 1,000-element sweep's submit).
    return f'{head[:-1]}, "spec": {row.spec_json}}}\n'


@functools.lru_cache(maxsize=4)
def _submitted_from(state_dir: str) -> dict[str, str]:
    """The store folder and host a ``runjob.json`` names (asked once, not once per element)."""
    import socket

    return {"state_dir": str(Path(state_dir).absolute()), "host": socket.gethostname()}


@functools.lru_cache(maxsize=1)
def job_side_files() -> dict[str, tuple[str, int]]:
    """The job-side package (``runjob_core/job/``, standard library only) as files under
    ``lib/``, with an empty ``runjob_core/__init__.py``: jobs ``import runjob_core.job`` on a
    node where runjob (and pluggy, attrs, ...) is not installed. Read once per process (a
    1,000-element sweep read them 1,000 times: 0.2 s): callers copy, never change it."""
    package = importlib.resources.files("runjob_core") / "job"
    files = {"lib/runjob_core/__init__.py": ('"""runjob job-side helpers."""\n', 0o644)}
    for entry in package.iterdir():
        if entry.name.endswith(".py"):
            files[f"lib/runjob_core/job/{entry.name}"] = (entry.read_text(), 0o644)
    return files


def script_name(layout: Layout, rendered: Rendered) -> str:
    """The script's file name in the job folder: the attempt's own, when the layout has one."""
    return layout.script_path.rsplit("/", 1)[1] if layout.script_path else rendered.script_name


def per_attempt(rendered: Rendered, layout: Layout) -> Rendered:
    """*rendered* named as its attempt's own script (``run.<n>.sh``) unless the backend chose
    a name: every backend submits ``rendered.script_name``, and a resubmission never
    overwrites the script a queued job will run."""
    if rendered.script_name != "run.sh" or not layout.script_path:
        return rendered
    return attrs.evolve(rendered, script_name=script_name(layout, rendered))


def _ignore_patterns(root: Path) -> list[str]:
    patterns = list(_ALWAYS_IGNORED)
    gitignore = root / ".gitignore"
    if gitignore.is_file():
        for line in gitignore.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("!"):
                patterns.append(line.rstrip("/").lstrip("/"))
    return patterns


def _ignored(relpath: str, patterns: list[str]) -> bool:
    parts = relpath.split("/")
    for pattern in patterns:
        if "/" in pattern:
            if fnmatch.fnmatch(relpath, pattern) or relpath.startswith(pattern + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pattern) for part in parts):
            return True
    return False


def local_files(root: Path) -> dict[str, tuple[int, float]]:
    """Files of a local workdir to upload: relative path -> (size, mtime), .gitignore honoured."""
    patterns = _ignore_patterns(root)
    files: dict[str, tuple[int, float]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        dirnames[:] = [d for d in dirnames if not _ignored(d if rel_dir == "." else f"{rel_dir}/{d}", patterns)]
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if _ignored(rel, patterns):
                continue
            st = (Path(dirpath) / name).stat()
            files[rel] = (st.st_size, st.st_mtime)
    return files


def workdir_hashes(root: Path) -> dict[str, str]:
    """The code a job runs: relative path -> sha256 of every file of *root* that is synced
    (.gitignore honoured), after checking the size limit on the files' sizes."""
    import hashlib

    if not root.is_dir():
        message = f"workdir {root} does not exist; fix 'workdir:' in the job file"
        raise RunjobError(message)
    local = local_files(root)
    total = sum(size for size, _ in local.values())
    if total > MAX_SYNC_BYTES:
        biggest = sorted(local.items(), key=lambda item: -item[1][0])[:3]
        names = ", ".join(f"{name} ({size >> 20} MiB)" for name, (size, _) in biggest)
        message = (
            f"workdir {root} holds {total >> 20} MiB to upload (limit {MAX_SYNC_BYTES >> 20} MiB): {names}; "
            "add data and checkpoints to .gitignore and read them from scratch"
        )
        raise RunjobError(message)
    hashes = {}
    for rel in sorted(local):
        with open(root / rel, "rb") as handle:
            hashes[rel] = hashlib.file_digest(handle, "sha256").hexdigest()
    return hashes


def check_code(source: Path, job: JobSpec, started_with: dict[str, str] | None, *, accept_changes: bool) -> dict[str, str]:
    """The hashes of the workdir *source*; a change since *started_with* (the code the job
    started with) is refused with the files named, unless *accept_changes*."""
    hashes = workdir_hashes(source)
    changes = code_changes(started_with, hashes) if started_with is not None else []
    if changes and not accept_changes:
        shown = ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")
        raise RefusedError(f"the workdir {source} changed since {job.name} started: {shown}; a resumed job runs the "
                           "code it started with: put those files back, or pass --force to run the changed code")
    return hashes


def code_hash(hashes: dict[str, str]) -> str:
    """One short hash of a whole workdir (names and contents): the report names it."""
    import hashlib

    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]


def code_changes(started_with: dict[str, str], now: dict[str, str]) -> list[str]:
    """What changed in a workdir since *started_with*: ``"path (changed|added|deleted)"``."""
    out = [f"{rel} (changed)" for rel in sorted(now) if rel in started_with and started_with[rel] != now[rel]]
    out += [f"{rel} (added)" for rel in sorted(now) if rel not in started_with]
    out += [f"{rel} (deleted)" for rel in sorted(started_with) if rel not in now]
    return out


def manifest_path(dest: str) -> str:
    """Where the hashes of what was uploaded to the work copy *dest* are kept (beside it)."""
    return dest.rstrip("/") + ".sha256.json"


def sync_workdir(transport: Transport, source: Path, dest: str, hashes: dict[str, str] | None = None) -> list[str]:
    """Make the work copy *dest* hold the code of *source*: content decides (sha256 against
    the hashes of the last upload, kept beside the copy), files deleted here are deleted
    there. Files the job itself wrote into the copy are left alone. Returns what changed."""
    hashes = workdir_hashes(source) if hashes is None else hashes
    transport.makedirs(dest)
    try:
        uploaded = json.loads(transport.read_text(manifest_path(dest)) or "{}")
    except ValueError:
        uploaded = {}  # a damaged record: upload everything again
    changed = []
    made_dirs = {dest}
    for rel, digest in hashes.items():
        if uploaded.get(rel) == digest:
            continue
        target = _join(dest, rel)
        folder = target.rsplit("/", 1)[0]
        if folder not in made_dirs:
            transport.makedirs(folder)
            made_dirs.add(folder)
        transport.put_file(source / rel, target)
        changed.append(rel)
    gone = [rel for rel in sorted(uploaded) if rel not in hashes and isinstance(rel, str) and ".." not in rel.split("/")]
    if gone:
        result = transport.run(["rm", "-f", "--", *(_join(dest, rel) for rel in gone)])
        if not result.ok:
            raise RunjobError(f"could not delete {len(gone)} file(s) removed from {source} in the work copy {dest}: "
                              f"{result.stderr.strip()}")
        changed += gone
    transport.put_text(manifest_path(dest), json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    return changed


def unsynced_command_files(job: JobSpec) -> list[str]:
    """Files the job's command names that lie beside its spec, for a job without ``workdir:``.

    On a machine that is not this one nothing is uploaded without ``workdir:`` (the job runs
    in its own fresh job folder), so ``python3 train.py`` there fails with "can't open file"
    after the queue wait; the caller refuses that before submitting."""
    import shlex

    if job.workdir or not job.command:
        return []
    try:
        words = shlex.split(job.command)
    except ValueError:
        return []  # unbalanced quotes: the shell will say so; nothing to check here
    base = Path(job.base_dir)
    return [word for word in words
            if not word.startswith(("-", "/", "~", "$")) and "=" not in word and (base / word).is_file()]
