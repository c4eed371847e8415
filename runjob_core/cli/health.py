"""runjob health scan: the log health checks, offline, on files."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import print_json, print_table


@click.group("health")
def command() -> None:
    """Health checks of the runjob-health plugin."""


@command.command("scan")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--max-tokens", type=int, help="The job's max_tokens, for the truncation check.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, one object per file.")
def scan(files: tuple[str, ...], max_tokens: int | None, as_json: bool) -> None:
    """Run every log checker on FILES; exit 1 if any error-level finding."""
    try:
        from runjob_health import _scan
    except ImportError:
        raise click.ClickException("the health checks come with runjob-health: pip install runjob-health") from None
    results = []
    for path in files:
        hits = _scan.scan_file(path, max_tokens=max_tokens)
        results.append({"file": path, "findings": [
            {"label": h.label, "line": h.line, "message": h.message, "severity": h.severity, "action": h.action}
            for h in hits
        ]})
    if as_json:
        print_json(results)
    else:
        for result in results:
            if not result["findings"]:
                click.echo(f"{result['file']}: healthy")
                continue
            print_table(result["file"], ["line", "label", "severity", "action", "message"],
                        [[f["line"], f["label"], f["severity"], f["action"], f["message"]] for f in result["findings"]])
    if any(f["severity"] == "error" for r in results for f in r["findings"]):
        sys.exit(1)
