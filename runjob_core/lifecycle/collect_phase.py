"""The collect phase: bring an attempt's results into ``results/<name>/`` (the final collect,
which can always run again, or a peek at an attempt still running), record the artifacts,
give the machine back once its files are home, and tell the plugins (``runjob_collected``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from runjob_core import _plugin_errors, plugins
from runjob_core.collecting import manifest as _results_folder
from runjob_core.collecting import results_folder
from runjob_core.context import RunContext
from runjob_core.errors import RunjobError
from runjob_core.lifecycle.machines import job_cluster, release_attempt
from runjob_core.models import ACTIVE_STATES, ARTIFACT_PROBLEM, ARTIFACT_RESULTS, Artifact, ClusterConfig, JobStatus, Submission
from runjob_core.store import AttemptRow, JobRow


@attrs.frozen
class Collected:
    """What collect brought home: the local results folder, the artifacts and any problem.
    *partial* is a peek at an attempt still running: a copy of what it has written so far,
    nothing recorded as final, nothing released."""

    dest: Path
    artifacts: tuple[Any, ...]
    problems: tuple[str, ...]
    partial: bool = False
    state: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def collect(context: RunContext, row: JobRow) -> Collected:
    """Bring the latest attempt's results into ``results/<name>/``. Of an attempt still
    running (after one fresh poll) this is a peek (:func:`peek`); once it ended, the final
    collect, which can always run again: it fetches what is missing or changed locally."""
    # Two processes finishing the same job (two `runjob run`) download one after the other.
    with context.store.claim(f"collect:{row.id}"):
        attempt = context.store.latest_attempt(row.id)
        if attempt is not None and attempt.state in ACTIVE_STATES and attempt.submission_json:
            from runjob_core import monitor

            monitor.cycle(context, [row.id])  # it may have ended since the store last heard
            attempt = context.store.latest_attempt(row.id)
        if attempt is not None and attempt.state in ACTIVE_STATES and attempt.submission_json:
            return peek(context, row, attempt)
        return _collect(context, row)


def peek(context: RunContext, row: JobRow, attempt: AttemptRow) -> Collected:
    """Copy what a running attempt has written so far. The backend's collect gets the
    attempt's active status (publishers then publish nothing); no artifact is recorded, the
    machine is kept, and the folder's manifest says the copy is partial."""
    cluster = job_cluster(context, row)
    dest = _own_results_folder(context, row)
    dest.mkdir(parents=True, exist_ok=True)
    status = stored_status(attempt)
    artifacts = _collect_artifacts(context, row, attempt.n, attempt.submission, status, dest, cluster)
    _results_folder.write(dest, row.id, attempt.n, _collected_files(artifacts, dest), final=False)
    rows = sum(a.rows or 0 for a in artifacts if a.kind == ARTIFACT_RESULTS)
    context.event(row.id, "peeked", f"copied what attempt {attempt.n} ({attempt.state}) has written so far into {dest}: "
                  f"{rows} rows, partial; the final collect follows its end", attempt=attempt.n)
    return Collected(dest, tuple(artifacts), (), partial=True, state=attempt.state)


def _own_results_folder(context: RunContext, row: JobRow) -> Path:
    """``results/<name>/``, holding this job's results only: a namesake's are moved aside first."""
    dest = results_folder(row)
    moved = _results_folder.claim(dest, row.id)
    if moved is not None:
        owner = _results_folder.read(moved)
        context.event(row.id, "results_moved", f"{dest} held {'the results of ' + owner['job_id'] if owner else 'files runjob did not collect'}; "
                      f"moved them to {moved}")
        if owner is not None and owner["job_id"] != row.id:
            context.event(owner["job_id"], "results_moved", f"results moved from {dest} to {moved}: "
                          f"{row.id} (also {row.name}) collected into {dest}")
    return dest


def _collected_files(artifacts: list, dest: Path) -> list[str]:
    """The files the backend brought (its ``results`` artifact's ``files``; else all under *dest*)."""
    listed = [f for a in artifacts if a.kind == ARTIFACT_RESULTS for f in (a.data.get("files") or [])]
    if listed or any(a.kind == ARTIFACT_RESULTS for a in artifacts):
        return listed
    return [p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file() and not p.is_symlink()]


def _collect(context: RunContext, row: JobRow) -> Collected:
    attempt = context.store.latest_attempt(row.id)
    if attempt is None or attempt.submission is None:
        raise RunjobError(f"job {row.id} was never submitted; nothing to collect")
    submission = attempt.submission
    cluster = job_cluster(context, row)
    dest = _own_results_folder(context, row)
    if any(e.attempt == attempt.n for e in context.store.events(row.id, kinds=("collected",))):
        changed = _results_folder.damaged(dest, row.id, attempt.n)
        if not changed:
            # Collected already and untouched since (the other of two processes that followed the job): the same answer.
            stored = [Artifact(name=a.name, kind=a.kind, location=a.location, source=a.source, rows=a.rows, data=a.data)
                      for a in context.store.artifacts(row.id) if a.attempt == attempt.n]
            return Collected(dest, tuple(stored), (), state=attempt.state)
        # Deleted or changed here since: fetch again what is not as collected.
        _results_folder.drop(dest, changed)
        context.store.delete_artifacts(row.id, attempt.n)
        context.event(row.id, "recollecting", f"{len(changed)} collected file(s) are missing or changed in {dest} "
                      f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); fetching them again", attempt=attempt.n)
    status = stored_status(attempt)
    dest.mkdir(parents=True, exist_ok=True)
    artifacts = _collect_artifacts(context, row, attempt.n, submission, status, dest, cluster)
    problems = []
    for artifact in artifacts:
        context.store.add_artifact(row.id, attempt=attempt.n, name=artifact.name, kind=artifact.kind,
                                   location=artifact.location, source=artifact.source, rows=artifact.rows, data=artifact.data)
        severity = artifact.data.get("severity")
        if artifact.kind == ARTIFACT_PROBLEM and severity == "error":
            problems.append(f"{artifact.name}: {artifact.data.get('message', artifact.location)}")
        rows = f", {artifact.rows} rows" if artifact.rows is not None else ""
        context.event(row.id, "artifact", f"{artifact.kind} {artifact.name}: {artifact.location}{rows}",
                      attempt=attempt.n, source=artifact.source, data={"artifact": artifact.kind, "name": artifact.name,
                      "location": artifact.location, "rows": artifact.rows, **artifact.data})
    if not any(a.kind == ARTIFACT_RESULTS for a in artifacts):
        problems.append(f"no results were collected into {dest}: the job wrote no file under $RUNJOB_RESULTS "
                        f"({submission.results_dir} on {cluster.name}); write its rows there, e.g. with "
                        "runjob_core.job.ResultsWriter (see the example job: runjob init)")
    else:
        _results_folder.write(dest, row.id, attempt.n, _collected_files(artifacts, dest), final=True)
    # Where the files are (host and absolute folder): a report on another host of a shared state says so.
    from runjob_core.store import locator

    context.event(row.id, "collected" if not problems else "collect_failed",
                  f"collected into {dest}" if not problems else "; ".join(problems), attempt=attempt.n,
                  data={"host": locator.host(), "path": str(dest.resolve())})
    release_attempt(context, row, context.store.attempt(row.id, attempt.n), reason="collected")
    _announce_collected(context, row, submission, tuple(artifacts), tuple(problems), dest, cluster)
    return Collected(dest, tuple(artifacts), tuple(problems), state=attempt.state)


def _announce_collected(context: RunContext, row: JobRow, submission: Submission, artifacts: tuple[Artifact, ...],
                        problems: tuple[str, ...], dest: Path, cluster: ClusterConfig) -> None:
    """``runjob_collected``, once per final collect: each implementation on its own (the core's
    reporting last). A bug is the job's ``plugin_error``; an expected failure (a
    :class:`RunjobError`) an ``after_collect_failed`` event; the collect stands either way."""
    def failed(name: str, exc: BaseException) -> None:
        _plugin_errors.record(context, row.id, "runjob_collected", name, exc, attempt=submission.attempt)

    def refused(name: str, exc: RunjobError) -> None:
        context.event(row.id, "after_collect_failed", f"plugin {name!r} after the collect: {exc}",
                      attempt=submission.attempt, source=name)

    kwargs = {"job": row.spec, "submission": submission, "artifacts": artifacts, "problems": problems, "dest": dest,
              "cluster": cluster, "context": context}
    plugins.call_each(context.hook("runjob_collected", cluster.type), kwargs, on_error=failed, on_expected=refused)


def stored_status(attempt: AttemptRow) -> JobStatus:
    """The status of an attempt as the store last recorded it."""
    return JobStatus(state=attempt.state, source="runjob-store", exit_code=attempt.exit_code, reason=attempt.reason)


def _collect_artifacts(context: RunContext, row: JobRow, n: int, submission: Submission, status: JobStatus, dest: Path,
                       cluster: ClusterConfig) -> list:
    """The backend downloads (its failure is the collect's failure); a publisher or
    validator that breaks is reported as a problem and the others still run."""
    broken: list[Artifact] = []

    def failed(name: str, exc: BaseException) -> None:
        _plugin_errors.record(context, row.id, "runjob_collect", name, exc, attempt=n)
        broken.append(Artifact(name=name, kind=ARTIFACT_PROBLEM, location=str(dest), source=name,
                               data={"severity": "error", "message": f"plugin {name!r} failed: {type(exc).__name__}: {exc}"}))

    caller = context.hook("runjob_collect", cluster.type)
    kwargs = {"job": row.spec, "submission": submission, "status": status, "dest": dest, "cluster": cluster, "context": context}
    return plugins.flatten(plugins.call_each(caller, kwargs, on_error=failed)) + broken
