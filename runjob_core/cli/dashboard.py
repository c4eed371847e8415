"""runjob dashboard: build the static dashboard; --serve serves it on localhost and rebuilds."""

from __future__ import annotations

import errno
from pathlib import Path

import click

from runjob_core.cli._common import open_context

#: Why a dashboard folder cannot be written (read-only, not ours, full, a parent missing):
#: the user's to fix, so one line; any other OSError keeps its traceback.
_CANNOT_WRITE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENOENT, errno.ENOTDIR}


@click.command("dashboard")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to write the site to (default: .runjob/dashboard/).")
@click.option("--serve", is_flag=True, help="Serve it on localhost and rebuild while jobs run (Ctrl-C stops).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port for --serve (0: any free one).")
@click.option("--interval", type=click.FloatRange(0.5), default=5.0, show_default=True,
              help="With --serve: seconds between checks of the state store for changes.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="With --serve: the address to listen on; any but a loopback one needs --token.")
@click.option("--token", envvar="RUNJOB_DASHBOARD_TOKEN", default=None,
              help="With --serve: the token every request must carry (?token=TOKEN once, or a Bearer header); "
                   "also from RUNJOB_DASHBOARD_TOKEN.")
def command(out: Path | None, serve: bool, port: int, interval: float, host: str, token: str | None) -> None:
    """Build the dashboard: every job, one page per job, GPU-hours by cluster."""
    from runjob_core.reporting import chain, dashboard
    from runjob_core.reporting.serve import loopback

    if serve and not loopback(host) and not token:
        from runjob_core.errors import RunjobError

        raise RunjobError(f"--host {host} opens the dashboard (every job of the state) to the network: give --token "
                          "TOKEN (or RUNJOB_DASHBOARD_TOKEN), or serve on 127.0.0.1 behind a reverse proxy that asks "
                          "who is there")
    if token is not None and (len(token) < 16 or not all(c.isalnum() or c in "-_.~" for c in token)):
        from runjob_core.errors import RunjobError

        raise RunjobError("--token must be at least 16 characters of letters, digits and -_.~: use a long random one "
                          "(python -c 'import secrets; print(secrets.token_urlsafe())')")

    context = open_context(quiet_kinds=("dashboard_synced",))
    try:
        folder = out or context.state_dir / "dashboard"
        builder = dashboard.Builder(context.store, folder, clusters=context.clusters, refresh=int(interval * 2) if serve else None)
        try:
            built = builder.build()
        except OSError as exc:
            if exc.errno not in _CANNOT_WRITE:
                raise
            from runjob_core.errors import RunjobError

            where = exc.filename or folder
            raise RunjobError(f"cannot write the dashboard into {folder} ({exc.strerror}: {where}); make it writable, "
                              "or pass --out with a folder you can write") from None
        chain.record_synced(context.store, builder)
        click.echo(f"dashboard: {built['jobs']} jobs in {built['seconds']:.2f} s -> {built['path']}", err=True)
        if serve:
            from runjob_core.reporting.serve import serve as run_server

            run_server(builder, context.store, port=port, interval=interval, host=host, token=token)
        else:
            click.echo(Path(built["path"]).resolve().as_uri())
    finally:
        context.close()
