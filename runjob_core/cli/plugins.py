"""runjob plugins: what is installed, what it implements, what failed to load."""

from __future__ import annotations

import click

from runjob_core.cli._common import json_option, print_json, print_table


@click.command("plugins")
@json_option
def command(as_json: bool) -> None:
    """List plugins with their distribution, hooks, commands and load errors."""
    from runjob_core.plugins import get_plugin_manager

    _pm, infos = get_plugin_manager()
    commands = _commands()
    if as_json:
        # Each plugin with the commands its distribution adds (a distribution that adds
        # commands but no plugin is listed by its own name, with no hooks).
        entries = [{**info.to_json(), "commands": [c for c in commands if c["dist"] == info.dist]} for info in infos]
        listed = {info.dist for info in infos}
        for dist in sorted({c["dist"] for c in commands if c["dist"] not in listed}, key=str):
            entries.append({"name": dist, "dist": dist, "version": None, "hooks": [], "is_backend": False, "error": None,
                            "commands": [c for c in commands if c["dist"] == dist]})
        print_json(entries)
        return
    print_table(None, ["name", "distribution", "version", "backend", "hooks", "error"], [
        [i.name, i.dist or "-", i.version or "-", "yes" if i.is_backend else "", ", ".join(h.removeprefix("runjob_") for h in i.hooks),
         i.error or ""]
        for i in infos
    ])
    if commands:
        print_table("Commands from plugins", ["command", "distribution", "help"], [
            [c["name"], c["dist"] or "-", ("HIDDEN by runjob's own command; the plugin must rename it. " if c["hidden"] else "") + c["help"]]
            for c in commands
        ])


def _commands() -> list[dict]:
    from runjob_core._entry_points import describe_commands, entry_points
    from runjob_core.cli import COMMANDS

    helps = describe_commands()  # and kept for `runjob --help`
    return [{"name": ep.name, "dist": ep.dist, "help": helps.get(ep.name, "(no help)"), "hidden": ep.name in COMMANDS}
            for ep in sorted(entry_points("runjob.commands"), key=lambda ep: ep.name)]
