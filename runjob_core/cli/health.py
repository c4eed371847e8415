"""runjob health scan: every installed health checker, offline, on log files."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import prepared_plugins, print_json, print_table


@click.group("health")
def command() -> None:
    """Health checks of the installed checker plugins."""


@command.command("scan")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--max-tokens", type=int, help="The job's max_tokens, for the truncation check.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, one object per file.")
def scan(files: tuple[str, ...], max_tokens: int | None, as_json: bool) -> None:
    """Run every installed log checker on FILES (through runjob_check_health, as the monitor
    does); exit 1 if any error-level finding, 2 if a checker crashed (checks incomplete)."""
    from runjob_core.context import offline_context
    from runjob_core.monitor.scan import scan_file

    context = offline_context(prepared_plugins())
    try:
        if not context.pm.hook.runjob_check_health.get_hookimpls():
            raise click.ClickException("no health checker is installed: pip install runjob-health")
        results = []
        for path in files:
            crashed: list[str] = []
            findings = scan_file(context, path, max_tokens=max_tokens, failures=crashed)
            result = {"file": path, "findings": [
                {"label": f.label, "line": f.line, "message": f.message, "severity": f.severity, "action": f.action,
                 "source": f.source} for f in findings]}
            if crashed:
                result["checks_incomplete"] = crashed  # only then: the usual document is unchanged
            results.append(result)
    finally:
        context.close()
        context.store.close()
    if as_json:
        print_json(results)
    else:
        for result in results:
            for line in result.get("checks_incomplete", ()):
                click.echo(f"{result['file']}: checks incomplete: {line}", err=True)
            if not result["findings"]:
                if "checks_incomplete" not in result:
                    click.echo(f"{result['file']}: healthy")
                continue
            print_table(result["file"], ["line", "label", "severity", "action", "message", "source"],
                        [[f["line"], f["label"], f["severity"], f["action"], f["message"], f["source"]] for f in result["findings"]])
    if any(f["severity"] == "error" for r in results for f in r["findings"]):
        sys.exit(1)
    if any("checks_incomplete" in r for r in results):
        sys.exit(2)  # not "healthy": a checker that crashed checked nothing
