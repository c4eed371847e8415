"""Rendering of pre-flight results, the live job table and the report (rich)."""

from __future__ import annotations


import click

from runjob_core.cli._common import console, fmt_duration


def preflight(checks, as_json: bool) -> None:
    if as_json:
        return
    for estimate in checks.estimates:
        mark = {True: "[green]fits[/green]", False: "[red]does not fit[/red]", None: ""}[estimate.fits]
        console(stderr=True).print(f"[bold]estimate[/bold] {estimate.source}: {estimate.summary} {mark}")
    for warning in checks.warnings:
        click.secho(f"warning: {warning}", fg="yellow", err=True)


class LiveTable:
    """A live table of jobs on a terminal; nothing when output is not a terminal."""

    def __init__(self, *, enabled: bool, store=None) -> None:
        self.enabled = enabled
        self._live = None
        #: The state store the eta column reads the running jobs' progress from (None: no column).
        self.store = store

    def __enter__(self) -> LiveTable:
        if self.enabled:
            from rich.live import Live

            self._live = Live(console=console(stderr=True), refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, result) -> None:
        if self._live is None:
            return
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        table = Table(show_edge=False)
        etas = live_etas(self.store, result) if self.store is not None else {}
        for column in ("job", "id", "attempt", "state", "elapsed", "progress", "eta", "findings"):
            table.add_column(column)
        for view in result.views.values():
            progress = "-"
            if view.total and view.rows_done is not None:
                progress = ProgressBar(total=view.total, completed=view.rows_done, width=20)
            elif view.step is not None or view.rows_done is not None:
                progress = f"step {view.step}" if view.step is not None else f"{view.rows_done} rows"
            state = view.state + (f" ({view.reason})" if view.reason else "")
            eta = etas.get(view.job_id)
            eta_text = "-"
            if eta:
                from runjob_core.estimator.time_job import hms

                eta_text = hms(eta["remaining_seconds"]) + (" [yellow](over the time limit)[/]" if eta["warning"] else "")
            table.add_row(view.name, view.job_id, str(view.attempt), state,
                          fmt_duration(view.started_at, view.ended_at), progress, eta_text, ", ".join(view.findings) or "-")
        self._live.update(table)


def live_etas(store, result) -> dict:
    """ETAs of the jobs in a monitor cycle that are running (the live table's eta column)."""
    import time

    running = [v for v in result.views.values() if v.started_at and not v.ended_at]
    if not running:
        return {}
    from runjob_core.estimator.eta import eta_for

    now, out = time.time(), {}
    for view in running:
        eta = eta_for(store, store.get_job(view.job_id), now, total_hint=view.total)
        if eta:
            out[view.job_id] = eta
    return out


def report(data: dict) -> None:
    """Print the report (:func:`runjob_core.reporting.render.terminal`'s lines and tables)."""
    from rich.markup import escape

    from runjob_core.cli._common import print_table
    from runjob_core.reporting import render

    out = console()
    out.print()
    for block in render.terminal(data):
        if isinstance(block, render.Table):
            print_table(block.title, list(block.columns), [list(row) for row in block.rows])
            continue
        style = f"bold {block.colour}" if block.colour else "bold"
        label = f"[{style}]{escape(block.label)}[/{style}]" if block.label else ""
        out.print(" ".join(part for part in (label, escape(block.text)) if part))
