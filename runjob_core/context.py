"""What one invocation of runjob shares with its plugins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy

from runjob_core.transport import execute
from runjob_core.models import BackendInfo, ClusterConfig, Machine, Submission
from runjob_core.store import EventRow, Store
from runjob_core.transport import LocalTransport, Transport, harvested


@attrs.define
class PluginFailures:
    """What :mod:`runjob_core._plugin_errors` remembers of plugin bugs in one invocation:
    a traceback file per distinct error, one event per job and cycle, one line per plugin
    and hook on the terminal."""

    #: (plugin, hook, exception type, message) -> the file holding its traceback.
    tracebacks: dict[tuple[str, str, str, str], Path] = attrs.field(factory=dict)
    #: (job id, attempt, plugin, hook) of the ``plugin_error`` events recorded in this
    #: monitoring cycle (emptied when the next one starts: it may record them again).
    recorded: set[tuple[str | None, int | None, str, str]] = attrs.field(factory=set)
    #: (plugin, hook) already shown on the terminal: later events of it are quiet.
    shown: set[tuple[str, str]] = attrs.field(factory=set)


@attrs.define
class GpuMemory:
    """What the GPU telemetry (:mod:`runjob_core.gpu.telemetry`, read by the monitor) and the
    built-in GPU checks (:mod:`runjob_core.defaults.gpu_health`) keep between cycles, per
    attempt tag."""

    #: Attempt tag -> GPU index -> its idle clock and last sample (``telemetry.state``).
    gpus: dict[str, dict[int, dict[str, Any]]] = attrs.field(factory=dict)
    #: Attempt tag -> time.monotonic() before which nothing new can have been sampled.
    next_read: dict[str, float] = attrs.field(factory=dict)
    #: (tag, label, marker) of each GPU finding said already (once, not every cycle).
    said: set[tuple[str, str, str]] = attrs.field(factory=set)
    #: Attempt tag -> the last non-blank log line seen (quoted by the idle finding).
    last_lines: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class CoreMemory:
    """What the core remembers for the length of one invocation, outside the monitor (whose
    memory between cycles is its own :class:`runjob_core.monitor.Monitor`). Typed attributes,
    unlike the plugins' :meth:`RunContext.scratchpad`."""

    plugin_failures: PluginFailures = attrs.field(factory=PluginFailures)
    gpu: GpuMemory = attrs.field(factory=GpuMemory)
    #: (cluster, model.path, model.name) -> the model's maximum context or why it is unknown
    #: (:func:`runjob_core.defaults.model_length.supported`), read once per invocation.
    model_lengths: dict[tuple[str, str | None, str | None], Any] = attrs.field(factory=dict)
    #: Cluster name -> its backend's ``runjob_list_tagged`` answer (None: it cannot list),
    #: asked once per command (:func:`runjob_core.adopt.list_tagged`).
    tagged_jobs: dict[str, list[Any] | None] = attrs.field(factory=dict)
    #: (user template folder, plugin ids) -> the Jinja2 environment made for them
    #: (:func:`runjob_core.lifecycle.templates_for`): one per invocation, not one per render.
    templates: dict[tuple[str | None, tuple[int, ...]], Any] = attrs.field(factory=dict)


@attrs.define
class RunContext:
    """The state store, plugin manager, clusters and open transports of one invocation.

    Not a hook record: it is mutable and lives as long as the command. Transports are
    opened on first use and cached per cluster, so every job on a cluster shares one
    connection.
    """

    store: Store
    pm: pluggy.PluginManager
    clusters: dict[str, ClusterConfig]
    state_dir: Path
    #: Called with each event as it is recorded (the CLI prints them).
    on_event: Callable[[EventRow], None] | None = None
    _transports: dict[tuple[str, str | None], Transport] = attrs.field(factory=dict)
    _backends: dict[str, BackendInfo] | None = None
    _callers: dict[tuple[str, str], Any] = attrs.field(factory=dict)
    _scratch: dict[str, dict[Any, Any]] = attrs.field(factory=dict)
    #: What the core itself remembers for this invocation (never in the plugins' scratchpad).
    core_memory: CoreMemory = attrs.field(factory=CoreMemory, init=False)
    #: The invocation's :class:`runjob_core.monitor.Monitor`: everything the monitor keeps
    #: between cycles (its memo, observe leases, push watches ...) lives on it, made by
    #: ``Monitor.of(context)`` on first use (not imported here: the monitor sits above).
    monitor: Any = attrs.field(default=None, init=False)

    #: The one process runner; plugins call ``context.run(argv, ...)`` (never through a
    #: shell). A plain call *waits* for the process and *captures* its output: it returns a
    #: ``Completed`` with ``returncode``, ``stdout`` and ``stderr`` (text) once the process
    #: has ended, so never use it for something that runs as long as the job. For that,
    #: ``detach=True`` (with ``output_path=``) starts the process in its own session with
    #: its output appended to that file and returns at once with its ``pid``.
    run = staticmethod(execute.run)

    def transport(self, cluster: ClusterConfig, machine: Machine | None = None) -> Transport:
        """The transport to *cluster*'s standing host, or to *machine* when the backend
        created one for an attempt; opened once per invocation and shared."""
        key = (cluster.name, machine.id if machine is not None else None)
        cached = self._transports.get(key)
        if cached is None:
            caller = self.hook("runjob_transport", cluster.type)
            cached = caller(cluster=cluster, machine=machine, context=self) or LocalTransport()
            self._transports[key] = cached
        return cached

    def transport_for(self, submission: Submission) -> Transport:
        """The transport that reaches the machine *submission* runs on; once that machine
        was harvested and given back (a pod per attempt), the copy runjob keeps of the
        attempt's files (:mod:`runjob_core.transport.harvested`)."""
        machine = submission.machine
        if machine is not None and harvested.is_harvested(self.state_dir, submission.tag):
            return harvested.HarvestedCopy(harvested.folder(self.state_dir, submission.tag), machine.id)
        cluster = self.clusters.get(submission.cluster)
        if cluster is None:
            from runjob_core.errors import RunjobError

            message = f"job {submission.job_id} ran on cluster {submission.cluster!r}, which is no longer in clusters.yaml"
            raise RunjobError(message)
        return self.transport(cluster, submission.machine)

    def backend_info(self, backend: str) -> BackendInfo:
        """What backend *backend* declares (its option schema, poll interval, machines)."""
        if self._backends is None:
            from runjob_core.plugins import backend_infos

            self._backends = backend_infos(self.pm)
        return self._backends.get(backend) or BackendInfo(name=backend, source="runjob-core")

    def hook(self, name: str, backend: str) -> Any:
        """The caller of hook *name* routed to *backend* (cached: the monitor calls it per job)."""
        key = (name, backend)
        caller = self._callers.get(key)
        if caller is None:
            from runjob_core.plugins import routed

            caller = self._callers[key] = routed(self.pm, name, backend)
        return caller

    def scratchpad(self, owner: str) -> dict[Any, Any]:
        """A dict a plugin may keep per-invocation state in (e.g. streaming checkers).
        The plugins' own: the core keeps its state in typed attributes (:attr:`core_memory`,
        :attr:`monitor`)."""
        return self._scratch.setdefault(owner, {})

    def event(self, job_id: str | None, kind: str, message: str, *, source: str = "runjob",
              attempt: int | None = None, data: dict[str, Any] | None = None, **fields: Any) -> EventRow:
        return self.events([(job_id, kind, message, {"source": source, "attempt": attempt, "data": data, **fields})])[0]

    def events(self, events: list[tuple[str | None, str, str, dict[str, Any]]]) -> list[EventRow]:
        """:meth:`event` of many (job id, kind, message, keyword arguments of :meth:`event`),
        written in one statement per 500 and shown in order."""
        rows = []
        for job_id, kind, message, fields in events:
            fields = dict(fields)
            source, attempt, data = fields.pop("source", "runjob"), fields.pop("attempt", None), fields.pop("data", None)
            rows.append((job_id, kind, message, source, attempt, {**(data or {}), **fields} or None))
        made = self.store.add_events(rows)
        if self.on_event is not None:
            for row in made:
                self.on_event(row)
        return made

    def close(self) -> None:
        for transport in self._transports.values():
            transport.close()
        self._transports.clear()


def offline_context(pm: pluggy.PluginManager | None = None) -> RunContext:
    """A context for work that touches no job and no cluster (an offline log scan, the
    reference list): the plugins, the built-in local cluster, an in-memory store. Light on
    purpose: ``runjob health scan`` is timed against grep."""
    from runjob_core.config import local_cluster
    from runjob_core.store import state_dir

    if pm is None:
        from runjob_core.plugins import get_plugin_manager

        pm, _infos = get_plugin_manager()
    return RunContext(store=Store(Path(":memory:")), pm=pm, clusters={"local": local_cluster()}, state_dir=state_dir())
