"""What one invocation of runjob shares with its plugins."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy

from runjob_core import execute
from runjob_core.models import ClusterConfig, Submission
from runjob_core.staging import Layout
from runjob_core.store import EventRow, Store
from runjob_core.transport import LocalTransport, Transport


@attrs.frozen
class CurrentAttempt:
    """The attempt being rendered and submitted (set by the core around those hooks)."""

    job_id: str
    attempt: int
    tag: str
    layout: Layout
    resume_from: str | None = None
    resume_env: dict[str, str] = attrs.field(factory=dict)
    limit: int | None = None

    def submission(self, *, backend: str, cluster: str, backend_job_id: str, source: str,
                   extra: dict[str, str] | None = None) -> Submission:
        """The :class:`Submission` of this attempt, with every path filled in."""
        layout = self.layout
        return Submission(
            job_id=self.job_id, attempt=self.attempt, backend=backend, cluster=cluster,
            backend_job_id=backend_job_id, tag=self.tag, job_dir=layout.job_dir, workdir=layout.workdir,
            log_path=layout.log_path, results_dir=layout.results_dir, checkpoint_dir=layout.checkpoint_dir,
            progress_path=layout.progress_path, submitted_at=time.time(), source=source, extra=extra or {},
        )

    def template_vars(self) -> dict[str, Any]:
        from runjob_core import __version__

        layout = self.layout
        return {
            "version": __version__, "id": self.job_id, "attempt": self.attempt, "tag": self.tag,
            "job_dir": layout.job_dir, "workdir": layout.workdir, "results_dir": layout.results_dir,
            "checkpoint_dir": layout.checkpoint_dir, "progress_path": layout.progress_path,
            "params_path": layout.params_path, "log_path": layout.log_path, "lib_dir": layout.lib_dir,
            "cache_dir": layout.cache_dir, "scratch": layout.scratch, "resume_from": self.resume_from or "",
            "resume_env": self.resume_env, "limit": self.limit,
        }


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
    #: The attempt being rendered/submitted, for :func:`runjob_render` and :func:`runjob_submit`.
    current: CurrentAttempt | None = None
    _transports: dict[str, Transport] = attrs.field(factory=dict)
    _callers: dict[tuple[str, str], Any] = attrs.field(factory=dict)
    _scratch: dict[str, dict[Any, Any]] = attrs.field(factory=dict)

    #: The one process runner; plugins call ``context.run(argv, ...)``.
    run = staticmethod(execute.run)

    def transport(self, cluster: ClusterConfig) -> Transport:
        cached = self._transports.get(cluster.name)
        if cached is None:
            cached = self.hook("runjob_transport", cluster.type)(cluster=cluster, context=self) or LocalTransport()
            self._transports[cluster.name] = cached
        return cached

    def hook(self, name: str, backend: str) -> Any:
        """The caller of hook *name* routed to *backend* (cached: the monitor calls it per job)."""
        key = (name, backend)
        caller = self._callers.get(key)
        if caller is None:
            from runjob_core.plugins import routed

            caller = self._callers[key] = routed(self.pm, name, backend)
        return caller

    def scratchpad(self, owner: str) -> dict[Any, Any]:
        """A dict a plugin may keep per-invocation state in (e.g. streaming checkers)."""
        return self._scratch.setdefault(owner, {})

    def event(self, job_id: str | None, kind: str, message: str, *, source: str = "runjob",
              attempt: int | None = None, data: dict[str, Any] | None = None, **fields: Any) -> EventRow:
        merged = {**(data or {}), **fields}
        row = self.store.add_event(job_id, kind, message, source=source, attempt=attempt, data=merged or None)
        if self.on_event is not None:
            self.on_event(row)
        return row

    def close(self) -> None:
        for transport in self._transports.values():
            transport.close()
        self._transports.clear()
