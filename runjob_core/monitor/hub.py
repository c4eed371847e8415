"""The process end of the push path: one remote watcher per connection and log folder.

A :class:`Hub` lives where the connection lives: in the shared SSH agent
(:mod:`runjob_core.transport.agent`), or in the runjob process itself for a direct SSH or a local
transport. It starts ``data/watch/watcher.sh`` once per log folder over that connection
(``inotifywait -m -r`` on the folder, or a stat loop of a quarter second where inotify
cannot see the job's writes) and hands each changed path to the subscribers that follow it.
Any number of subscribers (``runjob run``, ``runjob logs -f``, ``runjob watch`` ...) share
the one remote process. It never runs a scheduler command.

A watcher that dies is reported to its subscribers (they go back to polling) and is started
again by a later ``follow`` once :data:`RESTART_SECONDS` have passed.
"""

from __future__ import annotations

import logging
import os
import posixpath
import subprocess
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any, Protocol

from runjob_core.errors import RunjobError

log = logging.getLogger(__name__)

#: A dead watcher is started again no sooner than this (env RUNJOB_WATCH_RESTART).
RESTART_SECONDS = 60.0
#: Callback kinds a subscriber receives.
PATH, STATE = "path", "state"


class Stream(Protocol):
    """A running watcher: line-wise output, a writable input, closable."""

    def readline(self) -> bytes: ...
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...


def mode() -> str:
    """``auto`` (inotify where it sees the writes, else the stat loop), ``inotify``, ``stat``
    or ``off`` (no push path: polling only, as before)."""
    value = os.environ.get("RUNJOB_WATCH", "auto").strip().lower()
    return value if value in ("auto", "inotify", "stat", "off") else "auto"


def restart_seconds() -> float:
    return float(os.environ.get("RUNJOB_WATCH_RESTART", RESTART_SECONDS))


def command(root: str, how: str) -> list[str]:
    """The argv that starts the watcher on *root* (an SSH transport quotes every part)."""
    folder = resources.files("runjob_core") / "data" / "watch"
    shim = (folder / "watcher.sh").read_text()
    loop = (folder / "stat_loop.py").read_text()
    return ["sh", "-c", shim, "runjob-watch", how, root, loop]


class _Watcher:
    """One remote watcher process and the thread that reads its output."""

    def __init__(self, hub: Hub, root: str) -> None:
        self.hub = hub
        self.root = root
        self.state = "starting"
        self.pid: int | None = None
        self.died_at: float | None = None
        self.stream: Stream | None = None
        self._write_lock = threading.Lock()

    def start(self) -> None:
        self.state, self.died_at = "starting", None
        try:
            self.stream = self.hub.opener(command(self.root, self.hub.how))
        except (OSError, EOFError, RunjobError) as exc:
            # No watcher means "poll as before": reported to the subscribers, not raised.
            log.info("watcher on %s did not start: %s", self.root, exc)
            self._died(f"did not start: {exc}")
            return
        threading.Thread(target=self._read, name=f"runjob-watch {self.root}", daemon=True).start()

    def stop(self) -> None:
        self.state = "stopped"
        if self.stream is not None:
            try:
                self.stream.close()
            except OSError:
                log.debug("closing a watcher stream failed")

    def send(self, lines: list[str]) -> None:
        if self.stream is None or not lines or self.state in ("dead", "none"):
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        try:
            with self._write_lock:
                self.stream.write(data)
        except OSError as exc:
            log.info("watcher on %s: write failed (%s)", self.root, exc)

    def _read(self) -> None:
        stream = self.stream
        reason = "its output ended"
        try:
            while line := stream.readline():
                text = line.decode("utf-8", "surrogateescape").rstrip("\n")
                if text.startswith("/"):
                    self.hub.dispatch(text)
                elif text.startswith("mode "):
                    parts = text.split(" ", 2)
                    if parts[1] == "none":
                        self.state = "none"
                        reason = parts[2] if len(parts) > 2 else "unsupported"
                        break
                    self.pid = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None
                    self.hub.mode_seen(self, parts[1])
                elif text in ("Watches established.", "ready"):
                    self.state = "alive"
                    self.hub.resend(self)
                    self.hub.announce(self.hub._state_line(self))
        except (OSError, EOFError) as exc:
            reason = f"connection lost: {exc}"
        self._died(reason)

    def _died(self, reason: str) -> None:
        if self.state == "stopped":
            return  # stopped on purpose: nobody to tell
        if self.state != "none":
            self.state = "dead"
        self.died_at = time.monotonic()
        if self.stream is not None:
            try:
                self.stream.close()
            except OSError:
                log.debug("closing a dead watcher stream failed")
        self.hub.announce(f"{self.state} {reason}")


class Subscription:
    """One follower of a hub: the paths it follows and where its news goes."""

    def __init__(self, hub: Hub, callback: Callable[[str, str], None]) -> None:
        self.hub = hub
        self.callback = callback
        self.paths: set[str] = set()

    def follow(self, paths: list[str]) -> None:
        self.hub.follow(self, paths)

    def unfollow(self, paths: list[str]) -> None:
        self.hub.unfollow(self, paths)

    def close(self) -> None:
        self.hub.unfollow(self, list(self.paths))
        self.hub.drop(self)


class Hub:
    """The remote watchers of one connection and their subscribers."""

    def __init__(self, opener: Callable[[list[str]], Stream], how: str | None = None) -> None:
        self.opener = opener
        self.how = how or mode()
        self.restart_after = restart_seconds()
        self.watchers: dict[str, _Watcher] = {}
        self.modes: dict[str, str] = {}
        self._subs: set[Subscription] = set()
        self._by_path: dict[str, set[Subscription]] = {}
        self._lock = threading.RLock()

    # ---------------------------------------------------------------- subscribers

    def subscribe(self, callback: Callable[[str, str], None]) -> Subscription:
        sub = Subscription(self, callback)
        with self._lock:
            self._subs.add(sub)
        return sub

    def drop(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)
            if self._subs:
                return
            # Nobody follows anything: the remote watcher stops (a later follow starts one).
            idle, self.watchers = list(self.watchers.values()), {}
        for watcher in idle:
            watcher.stop()

    def busy(self) -> bool:
        with self._lock:
            return bool(self._subs)

    def follow(self, sub: Subscription, paths: list[str]) -> None:
        by_root: dict[str, list[str]] = {}
        with self._lock:
            for path in paths:
                sub.paths.add(path)
                holders = self._by_path.setdefault(path, set())
                if not holders:
                    by_root.setdefault(_root_of(path), []).append("+" + path)
                holders.add(sub)
            for root, lines in by_root.items():
                watcher = self._ensure(root)
                if watcher.state == "alive":
                    watcher.send(lines)
            states = {self._state_line(self.watchers[_root_of(p)]) for p in paths}
        for state in states:
            sub.callback(STATE, state)

    def unfollow(self, sub: Subscription, paths: list[str]) -> None:
        by_root: dict[str, list[str]] = {}
        with self._lock:
            for path in paths:
                sub.paths.discard(path)
                holders = self._by_path.get(path)
                if holders is None:
                    continue
                holders.discard(sub)
                if not holders:
                    del self._by_path[path]
                    by_root.setdefault(_root_of(path), []).append("-" + path)
            for root, lines in by_root.items():
                if root in self.watchers:
                    self.watchers[root].send(lines)

    # ---------------------------------------------------------------- watchers

    def _ensure(self, root: str) -> _Watcher:
        watcher = self.watchers.get(root)
        if watcher is None:
            watcher = self.watchers[root] = _Watcher(self, root)
            watcher.start()
        elif watcher.state == "dead" and time.monotonic() - (watcher.died_at or 0) >= self.restart_after:
            watcher.start()
        return watcher

    def _state_line(self, watcher: _Watcher) -> str:
        if watcher.state == "alive":
            return f"alive {self.modes.get(watcher.root, '?')} {watcher.pid or 0}"
        return watcher.state

    def mode_seen(self, watcher: _Watcher, how: str) -> None:
        self.modes[watcher.root] = how

    def resend(self, watcher: _Watcher) -> None:
        """Tell a (re)started stat loop every path followed under its root."""
        with self._lock:
            lines = ["+" + p for p in self._by_path if _root_of(p) == watcher.root]
        watcher.send(lines)

    def announce(self, state: str) -> None:
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.callback(STATE, state)

    def dispatch(self, path: str) -> None:
        with self._lock:
            holders = self._by_path.get(path) or self._by_path.get(posixpath.dirname(path))
            holders = list(holders) if holders else []
        for sub in holders:
            sub.callback(PATH, path)

    def close(self) -> None:
        for watcher in self.watchers.values():
            if watcher.stream is not None:
                try:
                    watcher.stream.close()
                except OSError:
                    log.debug("closing a watcher stream failed")


def _root_of(path: str) -> str:
    """The watched folder of a followed path: the log folder (a marker folder sits in it)."""
    return posixpath.dirname(path)


# -------------------------------------------------------------------- streams


class ChannelStream:
    """A paramiko channel running the watcher (over the transport's one SSH connection)."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self._out = channel.makefile("rb")

    def readline(self) -> bytes:
        return self._out.readline()

    def write(self, data: bytes) -> None:
        self.channel.sendall(data)

    def close(self) -> None:
        self.channel.close()


class ProcessStream:
    """A local watcher process (pipes in and out)."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    def readline(self) -> bytes:
        return self.proc.stdout.readline()

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()  # the watcher stops at EOF
            except OSError:
                log.debug("the local watcher's stdin was already closed")
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # it ignored EOF: end it
            self.proc.kill()
            self.proc.wait()


def serve_socket(hub: Hub, conn: Any, send: Callable[[Any, dict], None], recv: Callable[[Any], dict | None]) -> None:
    """Carry one agent client's subscription: it sends {"follow": [...]} / {"unfollow": [...]},
    it receives {"path": P} and {"state": S}. Ends when the client hangs up."""
    lock = threading.Lock()
    gone = threading.Event()

    def callback(kind: str, value: str) -> None:
        if gone.is_set():
            return
        try:
            with lock:
                send(conn, {kind: value})
        except OSError:
            gone.set()  # the client hung up; the read loop below ends the subscription

    sub = hub.subscribe(callback)
    try:
        while (message := recv(conn)) is not None:
            if message.get("follow"):
                sub.follow(message["follow"])
            if message.get("unfollow"):
                sub.unfollow(message["unfollow"])
    except OSError:
        log.debug("a watch subscriber's connection dropped")
    finally:
        gone.set()
        sub.close()
