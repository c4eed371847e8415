"""runjob plugins: what is installed, what it implements, what failed to load."""

from __future__ import annotations

import click

from runjob_core.cli._common import json_option, print_json, print_table


@click.command("plugins")
@json_option
def command(as_json: bool) -> None:
    """List plugins with their distribution, hooks and load errors."""
    from runjob_core.plugins import get_plugin_manager

    _pm, infos = get_plugin_manager()
    if as_json:
        print_json([info.to_json() for info in infos])
        return
    print_table(None, ["name", "distribution", "version", "backend", "hooks", "error"], [
        [i.name, i.dist or "-", i.version or "-", "yes" if i.is_backend else "", ", ".join(h.removeprefix("runjob_") for h in i.hooks),
         i.error or ""]
        for i in infos
    ])
