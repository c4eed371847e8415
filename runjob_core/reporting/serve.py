"""``runjob dashboard --serve``: the built folder over HTTP on 127.0.0.1, rebuilt when the
state store changes (its database and WAL files' size or time), checked every *interval* s."""

from __future__ import annotations

import functools
import http.server
import threading
import time
from pathlib import Path

import click

from runjob_core.reporting import chain


def _signature(db: Path) -> tuple:
    out = []
    for path in (db, db.with_name(db.name + "-wal")):
        try:
            stat = path.stat()
            out.append((stat.st_size, stat.st_mtime_ns))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass


def serve(builder, db: Path, *, port: int, interval: float) -> None:
    """HTTP in a thread; the rebuilds here, in the thread that opened the store (SQLite
    connections belong to their thread). Ctrl-C stops both."""
    handler = functools.partial(_Quiet, directory=str(builder.out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name="runjob-dashboard-http", daemon=True)
    thread.start()
    click.echo(f"serving http://127.0.0.1:{server.server_address[1]}/index.html (Ctrl-C stops)", err=True)
    seen = _signature(db)
    try:
        while True:
            time.sleep(interval)
            now = _signature(db)
            if now != seen:
                builder.build()
                chain.record_synced(builder.store, builder)
                seen = _signature(db)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
