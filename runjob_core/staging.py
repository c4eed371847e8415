"""Where a job's files live on its cluster, and putting them there before submitting.

Layout on the cluster (``<scratch>`` is the cluster's ``scratch_path``; for the local
cluster ``.runjob/scratch``)::

    <scratch>/jobs/<name>/work/         the synced workdir (remote clusters; cwd of the job)
    <scratch>/jobs/<name>/<runjob id>/  run.<attempt>.sh, params.json, progress.json, lib/, results/, checkpoints/
    <scratch>/logs/<name>.<runjob id>.<attempt>.out
    <scratch>/cache/                    HF, torch, vLLM, pip caches

Each runjob job gets its own folder, so a fresh run never inherits old results, while
the attempts of one job share it, so a resumed attempt continues the same results. Each
attempt has its own script (``run.<attempt>.sh``) and log: a resubmission never overwrites
the script of a job still waiting in the queue.
"""

from __future__ import annotations

import fnmatch
import importlib.resources
import json
import os
from pathlib import Path

import attrs

from runjob_core.errors import RunjobError
from runjob_core.models import ClusterConfig, JobSpec, Layout, Rendered
from runjob_core.transport import LocalTransport, Transport

__all__ = ["Layout", "layout_for", "stage", "sync_workdir"]

#: Refuse to upload a workdir larger than this without being told (data belongs elsewhere).
MAX_SYNC_BYTES = 512 << 20
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
    local_workdir = Path(job.base_dir, job.workdir).resolve() if job.workdir else Path(job.base_dir).resolve()
    if is_local:
        workdir, sync_from = str(local_workdir), None
    elif job.workdir:
        workdir, sync_from = _join(scratch, "jobs", job.name, "work"), str(local_workdir)
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


def stage(transport: Transport, layout: Layout, job: JobSpec, rendered: Rendered) -> None:
    """Create the job's folders and put the script, params and job-side library in place."""
    files = {
        rendered.script_name: (rendered.script, 0o755),
        "params.json": (json.dumps(job.params, indent=2, sort_keys=True, default=str) + "\n", 0o644),
        **job_side_files(),
        **{name: (text, 0o644) for name, text in rendered.files.items()},
    }
    transport.put_tree(layout.job_dir, files, also_make=(layout.log_path.rsplit("/", 1)[0],))
    if layout.sync_from:
        sync_workdir(transport, Path(layout.sync_from), layout.workdir)


def job_side_files() -> dict[str, tuple[str, int]]:
    """The job-side package (``runjob_core/job/``, standard library only) as files under
    ``lib/``, with an empty ``runjob_core/__init__.py``: jobs ``import runjob_core.job`` on a
    node where runjob (and pluggy, attrs, ...) is not installed."""
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


def sync_workdir(transport: Transport, source: Path, dest: str) -> list[str]:
    """Upload only the files whose size or age differ from the remote copy."""
    if not source.is_dir():
        message = f"workdir {source} does not exist; fix 'workdir:' in the job file"
        raise RunjobError(message)
    local = local_files(source)
    total = sum(size for size, _ in local.values())
    if total > MAX_SYNC_BYTES:
        biggest = sorted(local.items(), key=lambda item: -item[1][0])[:3]
        names = ", ".join(f"{name} ({size >> 20} MiB)" for name, (size, _) in biggest)
        message = (
            f"workdir {source} holds {total >> 20} MiB to upload (limit {MAX_SYNC_BYTES >> 20} MiB): {names}; "
            "add data and checkpoints to .gitignore and read them from scratch"
        )
        raise RunjobError(message)
    transport.makedirs(dest)
    remote = {info.path: info for info in transport.listdir_recursive(dest)}
    changed = []
    made_dirs = {dest}
    for rel, (size, mtime) in sorted(local.items()):
        have = remote.get(rel)
        if have is not None and have.size == size and have.mtime >= int(mtime):
            continue
        target = _join(dest, rel)
        folder = target.rsplit("/", 1)[0]
        if folder not in made_dirs:
            transport.makedirs(folder)
            made_dirs.add(folder)
        transport.put_file(source / rel, target)
        changed.append(rel)
    return changed
