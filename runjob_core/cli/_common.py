"""Helpers shared by the CLI commands: context, printing, job lookup."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


_EVENT_COLOURS = {"rejected": "red", "submit_failed": "red", "collect_failed": "red", "resume_refused": "red",
                  "resume_failed": "red", "finding": "yellow", "resuming": "cyan", "submitted": "green", "collected": "green"}


def event_printer(as_json: bool, *, quiet_kinds: tuple[str, ...] = (), events_on_stdout: bool = False):
    """An on_event callback: JSON lines with --json, else readable lines; on stderr, so that
    stdout carries only the command's document (``watch --json``, whose output is the events
    themselves, passes *events_on_stdout*).

    Plain click styling, not rich: this runs on the submit path, where every import counts.
    """
    def show(event) -> None:
        if event.kind in quiet_kinds or (event.data or {}).get("quiet"):
            return  # quiet: the same plugin error was shown once already in this command
        if as_json:
            click.echo(json.dumps(event.to_json(), default=str), err=not events_on_stdout)
            return
        colour = _EVENT_COLOURS.get(event.kind)
        if event.kind == "finding" and event.data.get("severity") == "error":
            colour = "red"
        stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        click.echo(f"{click.style(stamp, dim=True)} {click.style(f'{event.kind:<10}', bold=True, fg=colour)} "
                   f"{click.style(event.message, fg=colour)}", err=True)
    show.for_people = not as_json  # a sweep's array shows people a few of its elements' lines
    return show


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def open_context(as_json: bool = False, *, quiet_kinds: tuple[str, ...] = (), clusters: Path | None = None,
                 events_on_stdout: bool = False):
    from runjob_core import lifecycle

    printer = event_printer(as_json, quiet_kinds=quiet_kinds, events_on_stdout=events_on_stdout)
    prepared = _prepared()
    pm = prepared.take() if prepared is not None else None
    context = lifecycle.open_context(clusters_path=clusters, on_event=printer, pm=pm)
    if prepared is not None:
        context.core_memory.templates.update(prepared.take_templates())  # rendered templates made ahead too
        prepared.after_answer.append(context.store.settle_wal)  # the warm child never closes the store
    return context


def prepared_plugins():
    """The plugin manager the warm process built before forking this command's child
    (:class:`runjob_core.plugins.Prepared`, passed as the root click context's ``obj``),
    or None: the command builds its own."""
    prepared = _prepared()
    return prepared.take() if prepared is not None else None


def _prepared():
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().obj if ctx is not None else None


def find_job(store, ref: str):
    """The job *ref* names: a job id or name, or a sweep's element ``SWEEP/ELEMENT``
    (:mod:`runjob_core.sweep._address`)."""
    from runjob_core.sweep._address import find_job as find

    return find(store, ref)


def load_job(path: str):
    from runjob_core import config

    return config.load_job(Path(path))


def print_json(data: Any) -> None:
    from runjob_core.cli import _jsonout

    click.echo(_jsonout.dumps(data))  # json.dumps(data, indent=2, default=str), in half the time


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*["" if v is None else _escape(str(v)) for v in row])
    console().print(table)


def confirm_review(assume_yes: bool):
    """The review step: show the summary and ask, unless --yes."""
    def confirm(job, cluster, rendered) -> bool:
        from runjob_core.lifecycle import review_rows

        if assume_yes:
            return True
        print_table(f"Review: {job.name}", ["", ""], [list(r) for r in review_rows(job, cluster, rendered)])
        if not sys.stdin.isatty():
            from runjob_core.errors import RefusedError

            raise RefusedError("not submitted: review needs a terminal to confirm; pass --yes to submit without asking")
        return click.confirm("Submit this job?", default=False)
    return confirm


def fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def fmt_duration(start: float | None, end: float | None) -> str:
    if not start:
        return "-"
    seconds = int((end or time.time()) - start)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
