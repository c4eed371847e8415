"""The monitor's end of the push path: which followed jobs the remote watcher saw change.

The job script writes markers into a small folder beside its log (:func:`marker_dir`):
``start`` when it begins, ``checkpoint`` when the job saved one, ``exit`` (the command's
exit code) when the command returns, ``end`` last. One remote watcher per cluster
connection (:mod:`runjob_core.monitor.hub`, run by the shared SSH agent, or in this process
for a direct SSH or local transport) reports new markers and log growth; the monitor sleeps
in :meth:`PushWatch.wait_for_wakeup` instead of ``time.sleep`` and is woken within a fraction of a
second. A marker that means "the scheduler's answer changed" (:data:`POLL_MARKERS`) makes the
monitor poll the scheduler once for that job; log growth only reads the new lines and runs
the health checks. The slow, batched poll cadence stays as the safety net, and whenever no
watcher is alive (off, unsupported, died) the monitor polls exactly as it did without one.
"""

from __future__ import annotations

import logging
import posixpath
import socket
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

import attrs

from runjob_core.monitor import hub as _watchhub
from runjob_core.errors import RunjobError

if TYPE_CHECKING:
    from runjob_core.context import RunContext

log = logging.getLogger(__name__)

#: Markers after which the scheduler's answer is worth asking for at once.
POLL_MARKERS = frozenset({"start", "exit", "end"})
#: After the first news, wait this long for more (one job's exit and end markers, its last
#: log lines) so they cost one scheduler poll, not three.
DEBOUNCE_SECONDS = 0.05
#: At most one scheduler poll per this many seconds on the watcher's word: jobs of a sweep
#: that end a moment apart share one squeue (the end is still reported within ~1 s).
WAKE_POLL_GAP = 1.0
#: A job writing its log non-stop is read at most this often (a line still shows in < 1 s).
LOG_WAKE_GAP = 0.25


def marker_dir(log_path: str) -> str:
    """The job's marker folder: beside its log, so one watch on the log folder sees both."""
    return log_path + ".markers"


#: Re-poll delays after an end marker while the scheduler still lists the job as running
#: (SLURM's epilog, accounting): then the slow cadence takes over.
CONFIRM_DELAYS = (0.25, 0.5, 1.0, 2.0, 4.0)
_ENDING = frozenset({"marker:exit", "marker:end", "confirm"})


def causes_poll(causes) -> bool:
    return any(c in ("confirm", "resync") or (c.startswith("marker:") and c[7:] in POLL_MARKERS) for c in causes)


class Watch:
    """The followed jobs of one cluster and what the watcher said about them."""

    def __init__(self, cluster: str, bell: threading.Condition) -> None:
        self.cluster = cluster
        self.bell = bell
        self.state = "starting"
        self.pid: int | None = None
        self.died_at: float | None = None
        self.history: list[str] = []  # every state it went through, for events and tests
        self.pending: dict[str, set[str]] = {}
        #: Followed jobs whose marker folder may be unwatched: those followed when the watcher
        #: came alive. ``inotifywait -r`` adds its watch on the root *after* the folders under
        #: it, so a marker folder created (or renamed into place) during that scan gets no
        #: watch at all, and the job's end markers are never heard (seen on a loaded machine:
        #: the job's end waited for the slow poll). Until one of its markers is heard, the
        #: monitor polls as without a watcher (:meth:`PushWatch.all_alive`).
        self.uncertain: set[str] = set()
        self._paths: dict[str, tuple[str, str]] = {}  # path -> (job id, "log" | "markers")
        self._jobs: dict[str, tuple[str, str]] = {}  # job id -> (log path, marker folder)
        self._sub: Any = None

    @property
    def alive(self) -> bool:
        return self.state.startswith("alive")

    def follow(self, job_id: str, log_path: str) -> None:
        paths = (log_path, marker_dir(log_path))
        if self._jobs.get(job_id) == paths:
            return
        if job_id in self._jobs:
            self.unfollow(job_id)
        with self.bell:
            self._jobs[job_id] = paths
            self._paths[paths[0]] = (job_id, "log")
            self._paths[paths[1]] = (job_id, "markers")
        self._sub.follow(list(paths))

    def unfollow(self, job_id: str) -> None:
        with self.bell:
            self.uncertain.discard(job_id)
            paths = self._jobs.pop(job_id, None)
            if paths is None:
                return
            for path in paths:
                self._paths.pop(path, None)
        self._sub.unfollow(list(paths))

    def followed(self) -> set[str]:
        return set(self._jobs)

    def news(self, kind: str, value: str) -> None:
        """Called from the hub's or the agent reader's thread."""
        with self.bell:
            if kind == _watchhub.STATE:
                if value != self.state:
                    was_alive, self.state = self.alive, value
                    self.history.append(value)
                    if not self.alive:
                        self.died_at = time.monotonic()
                    elif not was_alive:
                        # News from before it was watching is lost: look at every followed job once.
                        for job_id in self._jobs:
                            self.pending.setdefault(job_id, set()).add("resync")
                        self.uncertain.update(self._jobs)
                    parts = value.split()
                    if parts[0] == "alive" and len(parts) > 2 and parts[2].isdigit():
                        self.pid = int(parts[2])
                self.bell.notify_all()
                return
            cause = self._cause(value)
            if cause is not None:
                self.pending.setdefault(cause[0], set()).add(cause[1])
                if cause[1].startswith("marker:"):  # its marker folder is watched after all
                    self.uncertain.discard(cause[0])
                self.bell.notify_all()

    def _cause(self, path: str) -> tuple[str, str] | None:
        hit = self._paths.get(path)
        if hit is not None:
            return hit[0], "log" if hit[1] == "log" else "marker:start"  # the folder appeared: the job began
        hit = self._paths.get(posixpath.dirname(path))
        if hit is not None and hit[1] == "markers" and not posixpath.basename(path).startswith("."):  # not a temp file
            return hit[0], "marker:" + posixpath.basename(path)
        return None

    def close(self) -> None:
        if self._sub is not None:
            self._sub.close()


class _AgentSubscription:
    """A subscription carried by the shared SSH agent (it runs the hub)."""

    def __init__(self, sock: socket.socket, callback) -> None:
        from runjob_core.transport import agent

        self._sock, self._callback, self._send = sock, callback, agent._send
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(agent._recv,), name="runjob-watch-agent", daemon=True).start()

    def _read(self, recv) -> None:
        try:
            while (message := recv(self._sock)) is not None:
                for kind, value in message.items():
                    self._callback(kind, value)
        except OSError as exc:
            log.debug("the agent's watch connection dropped: %s", exc)
        self._callback(_watchhub.STATE, "dead the SSH agent's watch connection closed")

    def _post(self, message: dict) -> None:
        try:
            with self._lock:
                self._send(self._sock, message)
        except OSError as exc:
            self._callback(_watchhub.STATE, f"dead cannot reach the SSH agent: {exc}")

    def follow(self, paths: list[str]) -> None:
        self._post({"follow": paths})

    def unfollow(self, paths: list[str]) -> None:
        self._post({"unfollow": paths})

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            log.debug("the agent's watch connection was already closed")
        self._sock.close()


def needs_poll(group, woken: dict[str, set[str]] | None, seen: dict) -> bool:
    """Whether this cycle asks the scheduler about *group* (one batched poll either way)."""
    if woken is None:
        return True
    for attempt in group:
        last = seen.get(attempt.job_id)
        if last is None or last.attempt.n != attempt.n or causes_poll(woken.get(attempt.job_id, ())):
            return True
    return False


@attrs.define(eq=False)
class PushWatch:
    """One monitor's push path: a :class:`Watch` per followed cluster, the bell their news
    ring, and what the wake-ups and confirmation re-polls need between cycles.

    Off until :meth:`enable`: a long-running follower (``monitor.watch``, ``runjob logs -f``,
    ``Session.wait``) asks for it; a one-off cycle (``runjob status``, ``watch --once``, the
    API's refresh) polls and starts no remote watcher."""

    context: RunContext  # whose clusters and transports the watches use
    enabled: bool = False
    #: Rung by a watch (from the hub's or the agent reader's thread) when news arrive.
    bell: threading.Condition = attrs.field(factory=threading.Condition)
    #: Cluster name -> its watch, or None where the cluster has no push path.
    by_cluster: dict[str, Watch | None] = attrs.field(factory=dict)
    #: Job id -> scheduler polls the push path asked for (recorded in its state events).
    wake_polls: dict[str, int] = attrs.field(factory=dict)
    #: Job id -> (when to poll it again, tries so far) after its end marker.
    confirms: dict[str, tuple[float, int]] = attrs.field(factory=dict)
    #: Cluster name -> marker folders of attempts that ended (removed after the cycle).
    spent: dict[str, list[str]] = attrs.field(factory=dict)
    #: Cluster name -> time.monotonic() of its last scheduler poll.
    polled: dict[str, float] = attrs.field(factory=dict)
    #: time.monotonic() of the newest scheduler poll, and of the last wake-up.
    newest_poll: float = 0.0
    last_wake: float = 0.0
    #: The in-process hub of each direct SSH or local transport (one per transport object;
    #: an agent transport's hub lives in the SSH agent).
    hubs: weakref.WeakKeyDictionary = attrs.field(factory=weakref.WeakKeyDictionary)

    def enable(self) -> None:
        self.enabled = True

    def for_cluster(self, cluster) -> Watch | None:
        """The cluster's :class:`Watch` (subscribed on first use), or None without a push path."""
        if not self.enabled:
            return None
        if cluster.name in self.by_cluster:
            watch = self.by_cluster[cluster.name]
            if watch is not None and watch.state.startswith("dead") and watch.died_at is not None \
                    and time.monotonic() - watch.died_at >= _watchhub.restart_seconds():
                self._revive(cluster, watch)
            return watch
        watch = None
        # A backend that makes a machine per job has no standing host whose log folder to watch.
        if _watchhub.mode() != "off" and not self.context.backend_info(cluster.type).machine_per_job:
            watch = Watch(cluster.name, self.bell)
            watch._sub = self._open(self.context.transport(cluster), watch.news, cluster.name)
            watch = watch if watch._sub is not None else None
        self.by_cluster[cluster.name] = watch
        return watch

    def for_submission(self, submission) -> Watch | None:
        """The watch that covers *submission*: its cluster's, unless the job runs on a machine
        of its own (no shared log folder to watch there yet: polling only)."""
        cluster = self.context.clusters.get(submission.cluster)
        if cluster is None or getattr(submission, "machine", None) is not None:
            return None
        return self.for_cluster(cluster)

    def _hub_for(self, transport) -> _watchhub.Hub:
        """The in-process hub of a direct SSH or local transport (one per transport object)."""
        hub = self.hubs.get(transport)
        if hub is None:
            from runjob_core.transport import LocalTransport

            wrap = _watchhub.ProcessStream if isinstance(transport, LocalTransport) else _watchhub.ChannelStream
            hub = self.hubs[transport] = _watchhub.Hub(lambda argv: wrap(transport.open_stream(argv)))
        return hub

    def _open(self, transport, callback, name: str):
        """A subscription to the hub that serves *transport*, or None (polling only)."""
        try:
            if hasattr(transport, "watch_socket"):
                return _AgentSubscription(transport.watch_socket(), callback)
            if hasattr(transport, "open_stream"):
                return self._hub_for(transport).subscribe(callback)
        except (OSError, RunjobError) as exc:
            log.info("no push path for %s: %s", name, exc)
        return None  # a transport without long-running commands: polling only

    def _revive(self, cluster, watch: Watch) -> None:
        """A new subscription for a watch whose watcher died a while ago, with every followed job."""
        watch.close()
        watch.died_at = time.monotonic()  # if this fails too, try again after the same wait
        sub = self._open(self.context.transport(cluster), watch.news, cluster.name)
        if sub is None:
            return
        watch._sub = sub
        jobs, watch._jobs, watch._paths = dict(watch._jobs), {}, {}
        for job_id, (log_path, _markers) in jobs.items():
            watch.follow(job_id, log_path)

    def count_poll(self, woken: dict[str, set[str]] | None, group, cluster: str) -> None:
        """Count scheduler polls made because of the push path, per job (for its state events)."""
        self.newest_poll = self.polled[cluster] = time.monotonic()
        if woken is None:
            return
        counts = self.wake_polls
        for attempt in group:
            if causes_poll(woken.get(attempt.job_id, ())):
                counts[attempt.job_id] = counts.get(attempt.job_id, 0) + 1

    def trigger(self, job_id: str, causes: set[str] | None) -> dict[str, Any]:
        """What a state event records about why the monitor looked: the watcher or the poll."""
        if not causes:
            return {"trigger": "poll"}
        data = {"trigger": "watcher", "causes": sorted(causes), "wake_polls": self.wake_polls.get(job_id, 0)}
        if causes & _ENDING:
            # Scheduler polls since the job said it ended, this one included (1: it confirmed at once).
            data["ending_polls"] = self.confirms.get(job_id, (0.0, 0))[1] + 1
        return data

    def track(self, watch: Watch | None, attempt, submission, status, causes: set[str] | None, *,
              stopping: bool = False) -> None:
        """Follow an active attempt's log and markers; stop when it ended (and remove its marker
        folder); re-poll soon when it wrote its end marker, or runjob just stopped it, but the
        scheduler still lists it."""
        if watch is None or getattr(submission, "machine", None) is not None:
            return  # a job on a machine of its own is not in the cluster's log folder: polled only
        confirms = self.confirms
        if status.terminal:
            watch.unfollow(attempt.job_id)
            confirms.pop(attempt.job_id, None)
            # Spent markers go: inotifywait -r would otherwise watch every old folder.
            self.spent.setdefault(submission.cluster, []).append(marker_dir(submission.log_path))
            return
        watch.follow(attempt.job_id, submission.log_path)
        if stopping or (causes and causes & _ENDING):
            tries = confirms.get(attempt.job_id, (0.0, 0))[1]
            if tries < len(CONFIRM_DELAYS):
                confirms[attempt.job_id] = (time.monotonic() + CONFIRM_DELAYS[tries], tries + 1)
            else:
                confirms.pop(attempt.job_id, None)

    def clean_up(self) -> None:
        """Remove the marker folders of attempts that ended this cycle (one command per cluster)."""
        spent = self.spent
        for cluster_name, folders in list(spent.items()):
            del spent[cluster_name]
            cluster = self.context.clusters.get(cluster_name)
            if cluster is None:
                continue
            try:
                result = self.context.transport(cluster).run(["rm", "-rf", "--", *folders])
            except RunjobError as exc:
                log.info("could not remove spent marker folders on %s: %s", cluster_name, exc)
                continue
            if not result.ok:
                log.info("could not remove spent marker folders on %s: %s", cluster_name, result.stderr.strip())

    def watches(self) -> list[Watch]:
        return [w for w in self.by_cluster.values() if w is not None]

    def full_poll_interval(self, interval: float, min_interval: float, max_interval: float, *, busy: bool) -> float:
        """The next wait between full polls. With a live watcher they are only the safety net
        (for what leaves no marker: a job the scheduler killed, a missed event), so they start
        at a quarter of the longest interval; without one, as before: back to the shortest
        after a change, else half as long again."""
        if self.all_alive():
            floor = max(min_interval, max_interval / 4)
            return floor if busy else min(max_interval, max(floor, interval * 1.5))
        return min_interval if busy else min(max_interval, interval * 1.5)

    def last_poll(self) -> float:
        """time.monotonic() of the oldest of the clusters' last scheduler polls (0 before any)."""
        return min(self.polled.values(), default=0.0)

    def all_alive(self) -> bool:
        """True when every cluster being followed has a live watcher that hears every followed
        job's markers (so the poll may slow down)."""
        current = self.watches()
        return bool(current) and all(w.alive and not w.uncertain for w in current)

    def wait_for_wakeup(self, timeout: float) -> dict[str, set[str]]:
        """Sleep up to *timeout* seconds, or until a watcher reports news about a followed job.

        Returns {job id: causes} ("log", "marker:end", "confirm" ...), empty after a quiet
        timeout. Without any watcher this is ``time.sleep(timeout)``.
        """
        bell, confirms = self.bell, self.confirms
        current = self.watches()
        deadline = time.monotonic() + max(0.0, timeout)
        if confirms:
            deadline = min(deadline, min(due for due, _ in confirms.values()))
        if not current:
            time.sleep(max(0.0, deadline - time.monotonic()))
        else:
            with bell:
                while not any(w.pending for w in current):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    bell.wait(remaining)
                news = any(w.pending for w in current)
            if news:
                time.sleep(DEBOUNCE_SECONDS)
                with bell:
                    wants_poll = any(causes_poll(c) for w in current for c in w.pending.values())
                if wants_poll:
                    hold = self.newest_poll + WAKE_POLL_GAP - time.monotonic()
                else:
                    hold = self.last_wake + LOG_WAKE_GAP - time.monotonic()
                if hold > 0:
                    time.sleep(hold)  # news meanwhile joins this wake-up
                self.last_wake = time.monotonic()
        woken: dict[str, set[str]] = {}
        now = time.monotonic()
        for job_id, (due, tries) in confirms.items():
            if due <= now:
                woken[job_id] = {"confirm"}
                confirms[job_id] = (float("inf"), tries)  # track() schedules the next one, if any
        with bell:
            for watch in current:
                for job_id, causes in watch.pending.items():
                    woken.setdefault(job_id, set()).update(causes)
                watch.pending.clear()
        return woken

    def close(self) -> None:
        """Stop following (the watches' subscriptions end; the hubs stay for a later enable)."""
        for watch in self.watches():
            watch.close()
        self.by_cluster.clear()
        self.enabled = False
