"""runjob publish: push any results folder to the Hugging Face Hub, then verify it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from runjob_core.cli.output import json_option, print_json


@click.command("publish")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--repo", required=True, help="Dataset repo id, ORG/NAME.")
@click.option("--endpoint", envvar="RUNJOB_HUB_ENDPOINT", help="Another Hub server [env var: RUNJOB_HUB_ENDPOINT].")
@click.option("--public", is_flag=True, help="Make the dataset public (default: private).")
@click.option("--revision", help="Commit to this branch (created if needed).")
@json_option
def command(path: Path, repo: str, endpoint: str | None, public: bool, revision: str | None, as_json: bool) -> None:
    """Publish the results in PATH as dataset REPO with a card; load them back and compare.

    The token comes from HF_TOKEN or the Hub's own login; it is never printed.
    """
    from runjob_core import readers
    from runjob_hub import artifacts
    from runjob_hub import publish as hub

    harness = readers.read(path)  # lm-eval's samples files: publish the one table they make
    table = artifacts.main_results_file(path, readers.write_rows(harness, path) if harness is not None else None)
    card = hub.CardInfo(model=None, benchmark=None, job_id=None, title=f"{path.name} results",
                        description=f"Results from the folder `{path.name}`, published with `runjob publish`.",
                        results_file=table.relative_to(path).as_posix() if table else None,
                        tasks=harness.tasks if harness is not None else {})
    result = hub.publish_results(path, repo, card=card, endpoint=endpoint, token=None, private=not public, revision=revision)
    check = None
    if table is not None:
        check = hub.verify_published(repo, endpoint=endpoint, token=None, revision=result.revision,
                                     local_rows=result.rows or 0, filename=table.relative_to(path).as_posix())
    if as_json:
        print_json({"repo": repo, "url": result.url, "revision": result.revision, "commit": result.commit_sha,
                    "files": list(result.files), "rows": result.rows,
                    "verified": None if check is None else check.ok, "remote_rows": None if check is None else check.remote_rows,
                    "samples": [] if check is None else check.samples, "message": None if check is None else check.message})
    else:
        click.echo(f"published {len(result.files)} files to {result.url} (revision {result.revision}, commit {result.commit_sha[:12]})")
        if check is not None:
            click.echo(f"verified: {check.message}" if check.ok else f"VERIFY FAILED: {check.message}")
    if check is not None and not check.ok:
        sys.exit(1)
