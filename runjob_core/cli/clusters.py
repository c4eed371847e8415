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
    from runjob_core.config import options

    path = config.find_clusters_file()
    clusters = config.load_clusters(path)
    if as_json:
        # Each cluster as its entry reads: the backend's keys flat beside the core's.
        print_json({"file": str(path) if path else None,
                    "clusters": {name: options.flat(c) for name, c in clusters.items()}})
        return
    click.echo(f"clusters file: {path or '(none: only the built-in local cluster)'}")
    # The backend's own rows (SLURM: partition and account), in the words it chose.
    print_table(None, ["name", "type", "host", "user", "scratch", "details"], [
        [c.name, c.type, c.host or "-", c.user or "-", c.scratch_path or "-",
         ", ".join(f"{label} {value}" for label, value in options.describe(c)) or "-"]
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


@command.command("keys")
@click.argument("backend")
@json_option
def keys(backend: str, as_json: bool) -> None:
    """The keys a BACKEND cluster takes beside the core's: type, default and help of each."""
    from runjob_core import plugins
    from runjob_core.config import options

    pm = plugins.get_plugin_manager()[0]
    info = plugins.backend_infos(pm).get(backend)
    if info is None:
        plugins.require_backend(pm, backend)  # says what is installed, or what to install
        raise click.ClickException(f"backend {backend!r} declares nothing (its runjob_backend_info returned None)")
    docs = options.declared(info.options)
    if as_json:
        print_json({"backend": backend, "source": info.source, "required_core_keys": list(info.required_keys),
                    "keys": [{"name": d.name, "type": d.type, "default": d.default, "required": d.required,
                              "choices": list(d.choices), "help": d.help} for d in docs]})
        return
    if info.required_keys:
        click.echo(f"a {backend} cluster must set: {', '.join(info.required_keys)}")
    if not docs:
        click.echo(f"backend {backend!r} ({info.source}) takes no keys beyond the core's")
        return
    print_table(f"Keys of a {backend} cluster ({info.source})", ["key", "type", "default", "help"], [
        [d.name, d.type + (f" ({' | '.join(map(str, d.choices))})" if d.choices else ""),
         "(required)" if d.required else repr(d.default), d.help] for d in docs])
