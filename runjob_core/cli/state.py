"""runjob state: where the state is, and copying a folder's state into a shared one."""

from __future__ import annotations

from pathlib import Path

import click

from runjob_core.cli._common import json_option, print_json


@click.group("state")
def command() -> None:
    """Where runjob keeps its state (a SQLite file, or a PostgreSQL database shared by a team)."""


@command.command("where")
def where() -> None:
    """Print the state this folder uses (a URL without its password)."""
    from runjob_core.store import locator, state_dir

    url = locator.state_url()
    if url is None:
        click.echo(f"sqlite://{state_dir().resolve() / 'state.db'} (this folder's, the default)")
    else:
        click.echo(locator.display_url(url))


@command.command("migrate")
@click.option("--to", "to_url", metavar="URL", help="The state to copy into (default: RUNJOB_STATE_URL or the "
              "state: key of a config file).")
@click.option("--from", "from_url", metavar="URL", help="The state to copy from (default: this folder's SQLite "
              "state, .runjob/state.db or $RUNJOB_HOME/state.db).")
@json_option
def migrate(to_url: str | None, from_url: str | None, as_json: bool) -> None:
    """Copy every job, attempt, event, artifact, metric point, log offset and sweep of one state
    into another, without loss (job ids kept), skipping what the target already has: running it
    again copies nothing. The source is left as it was."""
    from runjob_core.errors import RunjobError
    from runjob_core.store import Store, locator, state_dir
    from runjob_core.store import migrate as _migrate

    to_url = to_url or locator.state_url()
    if not to_url:
        raise RunjobError("runjob state migrate needs a target: --to postgresql://USER@HOST:PORT/DB (or set "
                          "RUNJOB_STATE_URL)")
    source = _open(from_url) if from_url else Store(state_dir() / "state.db")
    try:
        target = _open(to_url)
        try:
            if str(source.path) == str(target.path):
                raise RunjobError(f"the source and the target are the same state ({target.path}): give --from or --to")
            copied = _migrate.copy_state(source, target)
        finally:
            target.close()
    finally:
        source.close()
    if as_json:
        print_json({"from": str(source.path), "to": str(target.path), "copied": copied})
        return
    rows = ", ".join(f"{n} {table}" for table, n in copied.items())
    click.echo(f"copied {source.path} into {target.path}: {rows}")


def _open(url: str):
    from runjob_core.store import Store, locator

    if locator.is_postgres(url):
        return Store(url)
    return Store(Path(locator.sqlite_path(url)))
