"""``runjob dashboard --serve``: the built folder over HTTP on 127.0.0.1, rebuilt when the
state store changes (its database and WAL files' size or time), checked every *interval* s."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import click


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
    handler = functools.partial(_Quiet, directory=str(builder.out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    stop = threading.Event()

    def rebuild() -> None:
        seen = _signature(db)
        while not stop.wait(interval):
            now = _signature(db)
            if now != seen:
                seen = now
                builder.build()

    thread = threading.Thread(target=rebuild, name="runjob-dashboard-rebuild", daemon=True)
    thread.start()
    click.echo(f"serving http://127.0.0.1:{server.server_address[1]}/index.html (Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
