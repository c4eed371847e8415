"""The artifact chain after a backend downloaded a job's results into its folder:
publish to the Hugging Face Hub (when ``upload.repo`` is set), load back and verify,
validate, and say so in the activity log. Each step is an :class:`Artifact`; a problem of
severity ``error`` stops ``collect`` from reporting success.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from runjob_core.errors import RunjobError
from runjob_core.models import ARTIFACT_HUB, ARTIFACT_PROBLEM, ARTIFACT_VALIDATION, ARTIFACT_VERIFIED, Artifact

SOURCE = "runjob-core"
_RESULT_SUFFIXES = (".jsonl", ".parquet")


def main_results_file(dest: Path, table_file: Path | None = None) -> Path | None:
    """The results table of a folder: a results reader's rows (*table_file*) when one read
    it, else the largest .jsonl (else .parquet) file in it."""
    if table_file is not None:
        return table_file
    for suffix in _RESULT_SUFFIXES:
        candidates = sorted(dest.rglob(f"*{suffix}"), key=lambda p: (-p.stat().st_size, str(p)))
        if candidates:
            return candidates[0]
    return None


def _problem(label: str, severity: str, message: str, **data: Any) -> Artifact:
    return Artifact(name=label, kind=ARTIFACT_PROBLEM, location=message, source=SOURCE,
                    data={"severity": severity, "message": message, **data})


def validate(dest: Path, job, table_file: Path | None = None) -> list[Artifact]:
    from runjob_hub.validate import validate_results

    path = main_results_file(dest, table_file)
    if path is None:
        return []
    report = validate_results(path, max_tokens=job.model.max_tokens)
    out = [Artifact(
        name="validation", kind=ARTIFACT_VALIDATION, location=str(path), source=SOURCE, rows=report.rows,
        data={"ok": report.ok, "columns": report.columns, "token_range": report.token_range,
              "score_range": report.score_range, "score_mean": report.score_mean, "engine": report.engine},
    )]
    for problem in report.problems:
        out.append(_problem(problem.label, problem.severity, problem.message, count=problem.count,
                            examples=list(problem.examples)))
    return out


def _git_commit(folder: Path) -> tuple[str | None, bool]:
    from runjob_core.transport import execute

    try:
        head = execute.run(["git", "-C", str(folder), "rev-parse", "HEAD"], timeout=10)
        dirty = execute.run(["git", "-C", str(folder), "status", "--porcelain"], timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None, False
    return (head.stdout.strip() or None) if head.ok else None, bool(dirty.stdout.strip())


def publish(dest: Path, job, row, attempts: int, script: str | None, cluster: str, *,
            table_file: Path | None = None, tasks: dict | None = None) -> list[Artifact]:
    """Push the results with a dataset card, then load them back from the Hub and compare.
    *tasks* (a harness's aggregate scores) go into the card's Scores table."""
    from runjob_hub import publish as hub

    path = main_results_file(dest, table_file)
    if path is None:
        return [_problem("publish", "error", f"nothing to publish: no .jsonl or .parquet in {dest}")]
    commit, dirty = _git_commit(Path(job.base_dir))
    card = hub.CardInfo(
        model=job.model.name or job.model.path, benchmark=job.benchmark, job_id=row.id, attempts=attempts,
        parameters=dict(job.params), cluster=cluster, git_commit=commit, git_dirty=dirty, script=script,
        columns=dict(job.columns), title=f"{job.name} results", results_file=path.relative_to(dest).as_posix(),
        tasks=dict(tasks or {}),
    )
    endpoint = job.upload.endpoint
    try:
        result = hub.publish_results(dest, job.upload.repo, card=card, endpoint=endpoint, token=None,
                                     private=job.upload.private)
        check = hub.verify_published(job.upload.repo, endpoint=endpoint, token=None, revision=result.revision,
                                     local_rows=result.rows or 0, filename=path.relative_to(dest).as_posix())
    except RunjobError as exc:
        return [_problem("publish", "error", f"publishing to the Hub failed: {exc}")]
    out = [Artifact(name=job.upload.repo, kind=ARTIFACT_HUB, location=result.url, source=SOURCE, rows=result.rows,
                    data={"revision": result.revision, "commit": result.commit_sha, "files": list(result.files)})]
    if check.ok:
        out.append(Artifact(name="verify", kind=ARTIFACT_VERIFIED, location=result.url, source=SOURCE, rows=check.remote_rows,
                            data={"samples": check.samples, "message": check.message}))
    else:
        out.append(_problem("verify", "error", f"loaded back from the Hub: {check.message}",
                            remote_rows=check.remote_rows, local_rows=check.local_rows))
    return out
