"""Rendering of pre-flight results, the live job table and the report (rich)."""

from __future__ import annotations

import json
import time

import click

from runjob_core.cli._common import console, fmt_duration, print_table


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

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._live = None

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
        for column in ("job", "id", "attempt", "state", "elapsed", "progress", "findings"):
            table.add_column(column)
        for view in result.views.values():
            progress = "-"
            if view.total and view.rows_done is not None:
                progress = ProgressBar(total=view.total, completed=view.rows_done, width=20)
            elif view.step is not None or view.rows_done is not None:
                progress = f"step {view.step}" if view.step is not None else f"{view.rows_done} rows"
            state = view.state + (f" ({view.reason})" if view.reason else "")
            table.add_row(view.name, view.job_id, str(view.attempt), state,
                          fmt_duration(view.started_at, view.ended_at), progress, ", ".join(view.findings) or "-")
        self._live.update(table)


def report(data: dict) -> None:
    job = data["job"]
    out = console()
    out.print(f"\n[bold]Report: {job['name']}[/bold] ({job['id']}, {job['kind']}) on {job['cluster']}: "
              f"[bold]{job['state']}[/bold]" + (f" - {job['outcome']}" if job["outcome"] else ""))
    print_table("Attempts", ["#", "backend id", "state", "exit", "elapsed", "step", "rows", "resumed from"], [
        [a["n"], a["backend_job_id"], a["state"] + (f" ({a['reason']})" if a["reason"] else ""), a["exit_code"],
         fmt_duration(a["started_at"] or a["submitted_at"], a["ended_at"] or (time.time() if not a["ended_at"] else None)),
         a["step"], a["rows_done"], a["resumed_from"]]
        for a in data["attempts"]
    ])
    results = data["results"]
    if results.get("rows"):
        print_table(f"Results: {results['rows']} rows in {results['folder']}", ["column", "kind", "range", "mean", "missing"], [
            [name, info.get("kind", "-"),
             f"{info['min']} .. {info['max']}" if "min" in info else (f"{info['min_chars']} .. {info['max_chars']} chars" if "min_chars" in info else "-"),
             info.get("mean", "-"), info["missing"]]
            for name, info in results.get("columns", {}).items()
        ])
    else:
        out.print(f"Results: none in {results['folder']}")
    if data["samples"]:
        out.print("[bold]Samples[/bold]")
        for sample in data["samples"]:
            out.print("  " + json.dumps(sample, ensure_ascii=False, default=str), markup=False)
    if data["anomalies"]:
        print_table("Anomalies", ["label", "severity", "count", "message", "source"],
                    [[a["label"], a["severity"], a["count"], a["message"], a["source"]] for a in data["anomalies"]])
    else:
        out.print("Anomalies: none found")
    if data["artifacts"]:
        print_table("Artifacts", ["name", "kind", "location", "rows"],
                    [[a["name"], a["kind"], a["location"], a["rows"]] for a in data["artifacts"]])
    if "go_no_go" in data:
        verdict = data["go_no_go"]
        colour = "green" if verdict["go"] else "red"
        out.print(f"[bold {colour}]Canary verdict: {'GO' if verdict['go'] else 'NO-GO'}[/bold {colour}] "
                  f"(checked: {', '.join(verdict['checked'])}; problems: {', '.join(verdict['problems']) or 'none'})")
    out.print(f"[bold]Next:[/bold] {data['next_step']}")
