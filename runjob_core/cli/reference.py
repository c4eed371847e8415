"""runjob reference: benchmark references (new, list, show, check a job against one)."""

from __future__ import annotations

import sys

import click


class _ReferenceGroup(click.Group):
    def invoke(self, ctx: click.Context):
        from runjob_core.errors import RunjobError

        try:
            return super().invoke(ctx)
        except RunjobError as exc:
            raise click.ClickException(str(exc)) from None


_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")


@click.group("reference", cls=_ReferenceGroup)
def command() -> None:
    """Benchmark references: how to evaluate a benchmark right, and rules checked before a job runs.

    \b
    References come from .runjob/references/*.md, the seed layout
    .claude/references/datasets_and_tasks/ (indexed by datasets_and_tasks_map.md),
    plugins, and the pack shipped with runjob, in that order of precedence.
    """


def _plugin_references() -> list:
    """What installed plugins return from ``runjob_references``, without touching the state store."""
    from runjob_core import lifecycle, plugins, references

    pm, _infos = plugins.get_plugin_manager()
    if not pm.hook.runjob_references.get_hookimpls():
        return []
    context = lifecycle.offline_context(pm)
    try:
        return references.plugin_references(context)
    finally:
        context.close()
        context.store.close()


def _everything() -> list:
    from runjob_core import references

    return references.all_references(plugin_refs=_plugin_references())


def _find(name: str):
    from runjob_core import references
    from runjob_core.errors import RunjobError

    found = _everything()
    reference = references.find_reference(name, found)
    if reference is None:
        known = ", ".join(r.name for r in references.merge_references(found))
        raise RunjobError(f"no reference named {name!r}; known: {known}. Write one with: runjob reference new {name}")
    return reference


def _short_path(reference) -> str | None:
    """The file of a reference, relative to the project (or to the package, for the pack)."""
    from pathlib import Path

    if not reference.path:
        return None
    if reference.source == "runjob-core":
        return f"runjob_core/data/references/{Path(reference.path).name}"
    try:
        return str(Path(reference.path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return reference.path


def _summary(reference, shadowed_by=None) -> dict:
    return {
        "name": reference.name, "aliases": list(reference.aliases), "source": reference.source,
        "path": reference.path, "rules": len(reference.rules),
        "shadowed_by": None if shadowed_by is None else f"{shadowed_by.name} ({shadowed_by.source})",
    }


@command.command("new")
@click.argument("name")
def new(name: str) -> None:
    """Write .runjob/references/<name>.md: front matter and sections to fill in."""
    from runjob_core import references

    existing = references.find_reference(name, references.builtin_references())
    path = references.scaffold(name)
    click.echo(str(path))
    if existing is not None:
        click.echo(f"note: runjob ships a reference for {existing.name}; yours takes precedence "
                   f"(see: runjob reference show {existing.name})", err=True)


@command.command("list")
@_json_option
def list_(as_json: bool) -> None:
    """List every reference found: name, aliases, source, file."""
    from runjob_core import references

    found = _everything()
    hidden = references.shadowing(found)
    ordered = sorted(found, key=lambda r: (references.normalize(r.name), references.precedence(r)))
    rows = [_summary(r, hidden.get(id(r))) for r in ordered]
    shorts = [_short_path(r) for r in ordered]
    if as_json:
        from runjob_core.cli._common import print_json

        print_json(rows)
        return
    from runjob_core.cli._common import print_table

    print_table(None, ["name", "aliases", "source", "rules", "path"], [
        [r["name"], ", ".join(r["aliases"]) or "-", r["source"] + (f" (shadowed by {r['shadowed_by']})" if r["shadowed_by"] else ""),
         r["rules"], short or "-"]
        for r, short in zip(rows, shorts)
    ])


@command.command("show")
@click.argument("name")
@_json_option
def show(name: str, as_json: bool) -> None:
    """Show a reference: where it comes from, its rules and its text."""
    from runjob_core import references

    reference = _find(name)
    meta = references.reference_metadata(reference)
    if as_json:
        from runjob_core.cli._common import print_json

        print_json({**_summary(reference), "rules": list(reference.rules), "metadata": meta, "body": reference.body})
        return
    click.secho(f"{reference.name}", bold=True, nl=False)
    click.echo(f"  ({reference.source}{': ' + reference.path if reference.path else ''})")
    if reference.aliases:
        click.echo(f"aliases: {', '.join(reference.aliases)}")
    for key in ("description", "dataset", "scoring", "prompt_format", "num_fewshot", "expected_max_tokens"):
        value = meta.get(key)
        if value in (None, "", ()):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        click.echo(f"{key}: {value}")
    for source in meta.get("sources", ()):
        click.echo(f"source: {source}")
    if reference.rules:
        click.echo("rules:")
        for rule in reference.rules:
            click.echo(f"  - {references.describe_rule(rule)}")
    click.echo()
    click.echo(reference.body.rstrip())


@command.command("check")
@click.argument("name")
@click.argument("job_file", metavar="JOB.yaml", type=click.Path(dir_okay=False))
@_json_option
def check(name: str, job_file: str, as_json: bool) -> None:
    """Check JOB.yaml against the rules of reference NAME; exit 1 on any error-level failure."""
    from pathlib import Path

    from runjob_core import config, references

    job = config.load_job(Path(job_file))
    reference = _find(name)
    results = references.check_rules(reference, job)
    failed = any(r.failed_error for r in results)
    if as_json:
        from runjob_core.cli._common import print_json

        print_json({"reference": reference.name, "source": reference.source, "job": job.name, "ok": not failed,
                    "results": [r.to_json() for r in results]})
    else:
        from runjob_core.cli._common import print_table

        status = {True: "ok"}
        print_table(f"{job.name} against {reference.name} ({reference.source})", ["rule", "result", "detail", "why"], [
            [r.path, status.get(r.ok) or ("ERROR" if r.severity == "error" else "warning"), r.message, "" if r.ok else r.why]
            for r in results
        ])
        if not results:
            click.echo(f"{reference.name} has no rules to check.")
    if failed:
        sys.exit(1)
