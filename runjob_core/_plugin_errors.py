"""One path for a plugin's bug, whatever hook it raised in.

A plugin that raises anything but a :class:`~runjob_core.errors.RunjobError` has a bug.
For every hook (poll, cancel, collect, submit, reattach, provision, release, render,
health, scan, estimate, references) the core then:

* writes the traceback to a file under ``.runjob/errors/`` (one file per distinct error
  per process, never on the terminal: a traceback every poll cycle buries everything else);
* records one ``plugin_error`` event per job per cycle naming the plugin, the hook and
  that file (the report lists them as anomalies);
* shows one line per plugin and hook per command (the events after the first are marked
  ``quiet`` for the terminal);
* for the job's own backend in ``runjob_poll``: after :data:`BROKEN_AFTER` failing cycles
  (counted across processes, from the stored events) marks the job with what to do, and
  records no more errors for it (``runjob forget`` clears it).

Where the hook's answer is needed to go on (submit, cancel, reattach, provision, render),
the bug becomes a :class:`PluginError`: one line on the terminal, exit 1.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runjob_core.errors import RunjobError

if TYPE_CHECKING:
    from runjob_core.context import RunContext

#: Failing poll cycles of a job's backend before the job is marked as unreachable.
BROKEN_AFTER = 5


class PluginError(RunjobError):
    """A plugin raised an unexpected exception where its answer was needed; the message
    names the plugin, the hook and the file holding the traceback."""


def traceback_file(context: RunContext, plugin: str, hook: str, exc: BaseException) -> Path:
    """The file holding *exc*'s traceback (written once per distinct error per process)."""
    files = context.core_memory.plugin_failures.tracebacks
    key = (plugin, hook, type(exc).__name__, str(exc))
    if key not in files:
        from runjob_core.redact import redact

        folder = Path(context.state_dir) / "errors"
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{plugin}-{hook}")
        path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{len(files)}-{safe}.txt"
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        # Private to the user: a traceback may show paths and values of the job.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(redact(f"plugin {plugin!r} failed in {hook}\n\n{text}"))
        files[key] = path
    return files[key]


def describe(context: RunContext, plugin: str, hook: str, exc: BaseException) -> str:
    """The one line that names the plugin, the hook, the error and the traceback's file."""
    path = traceback_file(context, plugin, hook, exc)
    try:
        shown = path.relative_to(Path.cwd())
    except ValueError:
        shown = path
    return (f"plugin {plugin!r} failed in {hook}: {type(exc).__name__}: {exc} "
            f"(a bug in that plugin; traceback in {shown})")


def record(context: RunContext, job_id: str | None, hook: str, plugin: str, exc: BaseException,
           attempt: int | None = None, *, quiet: bool = False) -> str:
    """Record the bug once per job and cycle (see the module docstring); returns the line."""
    line = describe(context, plugin, hook, exc)
    failures = context.core_memory.plugin_failures
    key = (job_id, attempt, plugin, hook)
    if key in failures.recorded:
        return line
    failures.recorded.add(key)
    shown_before = quiet or (plugin, hook) in failures.shown
    failures.shown.add((plugin, hook))
    context.event(job_id, "plugin_error", line, attempt=attempt, source=plugin, hook=hook,
                  traceback=str(traceback_file(context, plugin, hook, exc)), quiet=shown_before)
    return line


def next_cycle(context: RunContext) -> None:
    """A new monitoring cycle: the same error may be recorded once more per job."""
    context.core_memory.plugin_failures.recorded.clear()


def raiser(context: RunContext, hook: str, *, job_id: str | None = None, attempt: int | None = None):
    """An ``on_error`` for :func:`runjob_core.plugins.call_each` where the answer is needed:
    records the bug, then raises :class:`PluginError` with its line."""
    def failed(plugin: str, exc: BaseException) -> None:
        # Recorded quietly: the raised error's message is the line the user sees.
        raise PluginError(record(context, job_id, hook, plugin, exc, attempt=attempt, quiet=True)) from exc
    return failed


def call_first(context: RunContext, caller: Any, kwargs: dict[str, Any], *, hook: str, blame: str,
               job_id: str | None = None, attempt: int | None = None) -> Any:
    """Call a first-result hook whose answer is needed; a plugin bug raises :class:`PluginError`."""
    from runjob_core import plugins

    results = plugins.call_each(caller, kwargs, firstresult=True, blame=blame,
                                on_error=raiser(context, hook, job_id=job_id, attempt=attempt))
    return results[0] if results else None


def poll_failed(context: RunContext, attempts: list, hook: str, plugin: str, exc: BaseException) -> set[str]:
    """A backend's poll raised for *attempts*: record it per job, and mark the jobs whose
    backend has now failed :data:`BROKEN_AFTER` cycles. Returns the ids of marked jobs."""
    store = context.store
    marked: set[str] = set()
    for attempt in attempts:
        if store.events(attempt.job_id, kinds=("backend_broken",)):
            marked.add(attempt.job_id)
            continue  # told already: no event per cycle for ever
        line = record(context, attempt.job_id, hook, plugin, exc, attempt=attempt.n)
        failures = [e for e in store.events(attempt.job_id, kinds=("plugin_error",)) if e.data.get("hook") == hook]
        if len(failures) >= BROKEN_AFTER:
            message = (f"backend {plugin!r} failed in {hook} {len(failures)} times ({line.split(' (a bug', 1)[0]}); runjob cannot "
                       f"tell what the job is doing. Fix or upgrade the plugin and run `runjob watch {attempt.job_id}`, or "
                       f"`runjob forget {attempt.job_id}` to stop following it (that stops nothing on the cluster)")
            context.event(attempt.job_id, "backend_broken", message, attempt=attempt.n, source=plugin, hook=hook)
            store.set_job(attempt.job_id, outcome=f"unreachable: backend {plugin!r} fails in {hook}")
            marked.add(attempt.job_id)
    return marked
