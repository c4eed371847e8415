"""``runjob dashboard --serve``: the built folder over HTTP on 127.0.0.1, rebuilt when the
state store changes (its database and WAL files' size or time; a shared PostgreSQL state's
change signature), checked every *interval* s.

Bound to 127.0.0.1 unless ``--host`` says otherwise; any other address needs a token (a lab's
dashboard shows every member's jobs, their commands and outcomes): a request carries it as
``Authorization: Bearer TOKEN``, or once as ``?token=TOKEN`` (answered with a cookie, so the
page's links and refreshes go on working). The token is compared in constant time and never
printed or logged."""

from __future__ import annotations

import functools
import hmac
import http.server
import ipaddress
import threading
from urllib.parse import parse_qs, urlsplit
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


_COOKIE = "runjob_dashboard"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    #: The token every request must carry (None: loopback only, no token asked).
    token: str | None = None

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass

    def _given(self) -> tuple[str, bool]:
        """(the token the request carries, whether it came in the query)."""
        header = self.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return header[7:].strip(), False
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == _COOKIE:
                return value, False
        query = parse_qs(urlsplit(self.path).query).get("token", [""])
        return query[0], True

    def _allowed(self) -> bool:
        if self.token is None:
            return True
        given, in_query = self._given()
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            self.send_error(401, "this dashboard needs its token: open it with ?token=TOKEN once")
            return False
        if in_query:  # once: a cookie for the page's links and refreshes, and the token off the address bar
            self.send_response(303)
            self.send_header("Location", urlsplit(self.path).path or "/")
            self.send_header("Set-Cookie", f"{_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/")
            self.end_headers()
            return False
        return True

    def do_GET(self) -> None:
        if self._allowed():
            super().do_GET()

    def do_HEAD(self) -> None:
        if self._allowed():
            super().do_HEAD()


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(builder, store, *, port: int, interval: float, host: str = "127.0.0.1", token: str | None = None) -> None:
    """HTTP in a thread; the rebuilds here, in the thread that opened the store (SQLite
    connections belong to their thread). Ctrl-C stops both."""
    handler = functools.partial(type("_Handler", (_Quiet,), {"token": token}), directory=str(builder.out))
    server = http.server.ThreadingHTTPServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="runjob-dashboard-http", daemon=True)
    thread.start()
    shown = f"[{host}]" if ":" in host else host
    needs = " (needs its token: ?token=TOKEN once)" if token else ""
    click.echo(f"serving http://{shown}:{server.server_address[1]}/index.html{needs} (Ctrl-C stops)", err=True)

    def signature():
        return store.change_signature() if store.shared else _signature(store.path)

    seen = signature()
    try:
        while True:
            time.sleep(interval)
            now = signature()
            if now != seen:
                builder.build()
                chain.record_synced(builder.store, builder)
                seen = signature()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
