"""runjob clusters: the configured clusters; `clusters check NAME` tests one."""

from __future__ import annotations

import sys

import click

from runjob_core.cli._common import json_option, print_json, print_table


class _ClustersGroup(click.Group):
    def invoke(self, ctx: click.Context):
        from runjob_core.errors import RunjobError

        try:
            return super().invoke(ctx)
        except RunjobError as exc:
            raise click.ClickException(str(exc)) from None


@click.group("clusters", cls=_ClustersGroup, invoke_without_command=True)
@json_option
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """List the clusters from clusters.yaml (plus the built-in local one)."""
    if ctx.invoked_subcommand is not None:
        return
    from runjob_core import config

    path = config.find_clusters_file()
    clusters = config.load_clusters(path)
    if as_json:
        print_json({"file": str(path) if path else None,
                    "clusters": {name: config.unstructure(c) for name, c in clusters.items()}})
        return
    click.echo(f"clusters file: {path or '(none: only the built-in local cluster)'}")
    print_table(None, ["name", "type", "host", "user", "partition", "account", "scratch"], [
        [c.name, c.type, c.host or "-", c.user or "-", c.default_partition or "-", c.default_account or "-", c.scratch_path or "-"]
        for c in clusters.values()
    ])


@command.command("check")
@click.argument("name")
@json_option
def check(name: str, as_json: bool) -> None:
    """Check that cluster NAME is reachable and usable; one row per check, with the fix."""
    from runjob_core.transport import checks
    from runjob_core.cli._common import open_context

    context = open_context(as_json)
    try:
        rows = checks.check_cluster(context, name)
    finally:
        context.close()
    if as_json:
        print_json({"cluster": name, "ok": all(r["ok"] for r in rows), "checks": rows})
    else:
        print_table(f"Cluster {name}", ["check", "result", "detail", "fix"],
                    [[r["check"], "ok" if r["ok"] else "FAILED", r["detail"], r.get("fix") or ""] for r in rows])
    if not all(r["ok"] for r in rows):
        sys.exit(1)
