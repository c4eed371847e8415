"""The sweep side of ``plan``, ``submit``, ``run``, ``status``, ``cancel`` and ``resume``:
a spec with a ``sweep:`` key, or a sweep's name or id (:mod:`runjob_core.sweep`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from runjob_core.cli._common import print_json


def is_sweep_file(path: str) -> bool:
    from runjob_core.sweep import is_sweep_file as check

    return check(Path(path))


def load(path: str, allow_large: bool):
    from runjob_core.sweep import load_sweep

    return load_sweep(Path(path), allow_large=allow_large)


def _values(values: dict, varying) -> str:
    shown = {k: v for k, v in values.items() if k in varying} or values
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in shown.items())


def show_preflight(sweep, checks, as_json: bool) -> None:
    """One block per resource shape: its elements, estimates, warnings and problems (stderr)."""
    if as_json:
        return
    for check in checks:
        names = ", ".join(sweep.elements[i].name for i in check.indices[:6]) + (" ..." if len(check.indices) > 6 else "")
        verdict = click.style("REFUSED", fg="red") if check.preflight.refused else click.style("ok", fg="green")
        click.echo(f"pre-flight {check.label} ({len(check.indices)} elements: {names}): {verdict}", err=True)
        for estimate in check.preflight.estimates:
            click.echo(f"  estimate {estimate.source}: {estimate.summary}", err=True)
        for warning in check.preflight.warnings:
            click.secho(f"  warning: {warning}", fg="yellow", err=True)
        for problem in check.preflight.problems:
            click.secho(f"  refused: {problem}", fg="red", err=True)


def element_rows(sweep, checks) -> list[list]:
    from runjob_core.sweep import _run

    bad = _run.refused(checks)
    return [[e.index, e.name, _values(e.values, sweep.varying), sweep.jobs[e.index].name,
             "REFUSED" if e.index in bad else "ok"] for e in sweep.elements]


def gate(context, sweep, *, yes: bool, force: bool, skip_refused: bool, as_json: bool):
    """Pre-flight per shape, the refusal (by element name), the review of the element table:
    (checks, elements to skip). Raises RefusedError when the sweep must not go on."""
    from runjob_core.cli._common import print_table
    from runjob_core.errors import RefusedError
    from runjob_core.sweep import _run

    checks = _run.preflight(context, sweep)
    show_preflight(sweep, checks, as_json)
    bad = _run.refused(checks)
    if bad and not force and not skip_refused:
        names = ", ".join(f"{i} ({sweep.elements[i].name})" for i in sorted(bad))
        raise RefusedError(f"pre-flight refused {len(bad)} of {len(sweep.jobs)} elements of sweep {sweep.name}: {names}\n"
                           "(pass --skip-refused to run the others, --force to submit them all anyway)")
    skip = set(bad) if not force else set()
    if not yes:
        print_table(f"Review: sweep {sweep.name} ({len(sweep.jobs)} elements, max_parallel "
                    f"{_run.parallel_limit(context, sweep)})", ["#", "element", "values", "job", "pre-flight"],
                    element_rows(sweep, checks))
        if not sys.stdin.isatty():
            raise RefusedError("not submitted: review needs a terminal to confirm; pass --yes to submit without asking")
        if not click.confirm(f"Submit the {len(sweep.jobs) - len(skip)} elements?", default=False):
            raise RefusedError("not submitted: the review was not confirmed")
    return checks, skip


def plan(context, sweep, as_json: bool) -> None:
    from runjob_core import config
    from runjob_core.cli._common import print_table
    from runjob_core.sweep import _run

    checks = _run.preflight(context, sweep)
    bad = _run.refused(checks)
    if as_json:
        print_json({"sweep": sweep.name, "spec_hash": sweep.spec_hash, "max_parallel": _run.parallel_limit(context, sweep),
                    "varying": list(sweep.varying), "refused": bool(bad),
                    "shapes": [{"label": c.label, "elements": list(c.indices), "refused": c.preflight.refused,
                                "problems": list(c.preflight.problems), "warnings": list(c.preflight.warnings),
                                "estimates": [config.unstructure(e) for e in c.preflight.estimates]} for c in checks],
                    "elements": [{"index": e.index, "name": e.name, "values": e.values, "job": sweep.jobs[e.index].name,
                                  "spec_hash": config.spec_hash(sweep.jobs[e.index]), "refused": e.index in bad}
                                 for e in sweep.elements]})
    else:
        show_preflight(sweep, checks, False)
        print_table(f"Plan: sweep {sweep.name} ({len(sweep.jobs)} elements, {len(checks)} resource shape"
                    f"{'s' if len(checks) != 1 else ''}, max_parallel {_run.parallel_limit(context, sweep)})",
                    ["#", "element", "values", "job", "pre-flight"], element_rows(sweep, checks))
        click.echo("verdict: " + (f"{len(bad)} elements REFUSED (--skip-refused runs the others, --force all)"
                                  if bad else "ready to submit"))
    if bad:
        sys.exit(1)


def submit(context, sweep, *, spec_path: str, yes: bool, force: bool, skip_refused: bool, as_json: bool) -> None:
    """Record the sweep and start as many elements as max_parallel allows; return."""
    from runjob_core.sweep import _run

    checks, skip = gate(context, sweep, yes=yes, force=force, skip_refused=skip_refused, as_json=as_json)
    row = _run.record(context, sweep)
    context.store.set_sweep_state(row.id, "active")
    _run.settle(context, row)
    limit = _run.parallel_limit(context, sweep)
    estimates = {i: c.preflight for c in checks for i in c.indices}
    from runjob_core.sweep import _budget

    _run.start(context, sweep, row, limit=limit, skip=skip, spec_path=spec_path, estimates=estimates,
               budget=_budget.from_checks(sweep, checks))
    table = _run.elements(context.store, row)
    waiting = [e for e in table if e["state"] == _run.NOT_SUBMITTED and e["index"] not in skip]
    if as_json:
        print_json({"sweep_id": row.id, "name": row.name, "elements": table})
        return
    click.echo(f"{row.id} {row.name}: {len(table) - len(waiting) - len(skip)} of {len(table)} elements submitted")
    if waiting:
        click.echo(f"{len(waiting)} wait for a free slot (max_parallel {limit}): `runjob run {spec_path}` or "
                   f"`runjob resume {row.name}` starts them as others end")


def run(context, sweep, *, spec_path: str | None, yes: bool, force: bool, skip_refused: bool, interval: float,
        as_json: bool, canary: bool = False) -> None:
    """Everything of ``runjob run`` for a sweep; exits 1 unless every element completed. With
    *canary*, the canary of the first element pre-flight accepts runs first, and the sweep is
    queued only on its GO."""
    from runjob_core.sweep import _run

    checks, skip = gate(context, sweep, yes=yes, force=force, skip_refused=skip_refused, as_json=as_json)
    if canary:
        run_canary(context, sweep, skip, spec_path=spec_path, force=force, interval=interval, as_json=as_json)
    row = _run.record(context, sweep)
    context.store.set_sweep_state(row.id, "active")
    driven = _run.drive(context, sweep, row, checks=checks, skip=skip, spec_path=spec_path, interval=interval)
    finish(row, driven, as_json)


def run_canary(context, sweep, skip: set[int], *, spec_path: str | None, force: bool, interval: float,
               as_json: bool) -> None:
    """The canary of one element (the first not refused), followed to its end: GO returns,
    NO-GO exits 1 before any element of the sweep is queued."""
    from runjob_core import lifecycle, monitor
    from runjob_core.reporting.report import build_report

    index = next(i for i in range(len(sweep.jobs)) if i not in skip)
    element = sweep.elements[index]
    click.echo(f"canary of sweep {sweep.name}: element {index} ({element.name}) before the sweep is queued", err=True)
    launched = lifecycle.launch(context, sweep.jobs[index], spec_path=spec_path, canary=True, force=force)
    info = context.backend_info(context.clusters[launched.row.cluster].type)
    monitor.watch(context, [launched.row.id], min_interval=min(interval, info.poll_interval),
                  max_interval=info.max_poll_interval)
    job = context.store.get_job(launched.row.id)
    if job.state == "COMPLETED":
        lifecycle.collect(context, job)
    verdict = build_report(context.store, context.store.get_job(job.id), clusters=context.clusters)["go_no_go"]
    if not verdict["go"]:
        why = "; ".join(verdict["problems"] or verdict["checked"])
        click.secho(f"canary NO-GO ({job.id}, {job.name}): {why}; the sweep was not queued "
                    f"(runjob report {job.id})", fg="red", err=True)
        sys.exit(1)
    click.echo(f"canary GO ({job.id}): {'; '.join(verdict['checked'])}; queueing the sweep", err=True)


def resume(context, row, *, yes: bool, interval: float, as_json: bool, only: int | None = None) -> None:
    """``runjob resume SWEEP``: start the elements that never ran, resubmit those that ended
    without completing (each from its newest checkpoint), follow them all to the end.
    *only*: just that element (``runjob resume SWEEP/3`` of an element never submitted)."""
    from runjob_core.errors import RefusedError
    from runjob_core.sweep import _run

    sweep = _run.from_record(row)
    table = _run.elements(context.store, row)
    todo = [e for e in table if not e["done"] and only in (None, e["index"])]
    if not todo:
        click.echo(f"sweep {row.name}: {'every element' if only is None else f'element {only}'} completed; "
                   "nothing to resume", err=True)
        return
    if not as_json:
        click.echo(f"sweep {row.name} ({row.id}): {len(todo)} of {len(table)} elements unfinished: "
                   + ", ".join(f"{e['index']} ({e['name']}, {e['state']})" for e in todo[:8]) + (" ..." if len(todo) > 8 else ""))
    if not yes and not click.confirm("Resubmit them?", default=False):
        raise RefusedError("not resubmitted")
    context.store.set_sweep_state(row.id, "active")
    skip = frozenset() if only is None else frozenset(e["index"] for e in table if e["index"] != only)
    driven = _run.drive(context, sweep, row, checks=[], skip=skip, restart_ended=True, interval=interval)
    finish(row, driven, as_json, only=only)


def finish(row, driven, as_json: bool, *, only: int | None = None) -> None:
    """The elements' table, and exit 1 naming the elements that did not complete (of *only*'s one)."""
    if as_json:
        print_json({"sweep_id": row.id, "name": row.name, "elements": driven.elements,
                    "not_started": {str(k): v for k, v in driven.not_started.items()}})
    else:
        print_elements(row, driven.elements)
    failed = [e for e in driven.failed if only in (None, e["index"])]
    if not failed:
        if not as_json:
            click.echo(f"sweep {row.name}: " + (f"all {len(driven.elements)} elements" if only is None else
                                               f"element {only}") + " completed and collected")
        return
    names = ", ".join(f"{e['index']} ({e['name']}: {_why(e, driven.not_started)})" for e in failed)
    click.secho(f"sweep {row.name}: {len(failed)} of {len(driven.elements)} elements did not complete: {names}",
                fg="red", err=True)
    click.echo(f"resubmit only those: runjob resume {row.name}" + ("" if only is None else f"/{only}"), err=True)
    sys.exit(1)


def _why(element: dict, not_started: dict) -> str:
    if element["index"] in not_started:
        return f"not started: {not_started[element['index']]}"
    if element["state"] == "COMPLETED":
        return "results not collected"
    return element["state"] + (f", {element['outcome']}" if element["outcome"] else "")


def print_elements(row, table: list[dict]) -> None:
    from runjob_core.cli import _plaintable

    columns = ["#", "element", "job id", "state", "outcome"]
    rows = [[str(e["index"]), e["name"], e["job_id"] or "-", e["state"] + ("" if not e["collected"] else f" ({e['collected']})"),
             e["outcome"] or ""] for e in table]
    done = sum(e["done"] for e in table)
    click.echo(f"sweep {row.name} ({row.id}, {row.state}): {done} of {len(table)} elements done")
    click.echo("\n".join(_plaintable.render(columns, rows, width=_plaintable.terminal_width(), whole=("#", "job id", "state"),
                                            drop_order=("outcome",))))
    if table:
        import re

        example = ",".join(f"{k}={v}" for k, v in table[0]["values"].items())
        by_values = f" or {row.name}/{example}" if re.fullmatch(r"[A-Za-z0-9._,=/+-]+", example) else ""  # shell-safe only
        click.echo(f"one element: {row.name}/0, {row.name}/{table[0]['name']}{by_values} "
                   "(status, report, logs, cancel, resume)")


def status(context, row, *, refresh: bool, as_json: bool) -> None:
    from runjob_core import monitor
    from runjob_core.sweep import _run

    if refresh:
        _run.settle(context, row)
        jobs = _run.element_jobs(context.store, row.id)
        active = [j.id for j in jobs.values() if context.store.active_attempts([j.id])]
        if active:
            monitor.cycle(context, active)
    row = context.store.find_sweep(row.id)
    table = _run.elements(context.store, row)
    if as_json:
        print_json({"sweep": {"id": row.id, "name": row.name, "state": row.state, "spec_hash": row.spec_hash,
                              "max_parallel": row.max_parallel or None, "created_at": row.created_at, "who": row.who},
                    "elements": table})
    else:
        print_elements(row, table)


def cancel(context, row, *, wait, force: bool, as_json: bool) -> dict:
    from runjob_core.sweep import _run

    asked = _run.cancel(context, row, wait=wait, force=force)
    table = _run.elements(context.store, row)
    if not as_json:
        click.echo(f"sweep {row.name} ({row.id}) cancelled: {len(asked)} active element(s) cancelled; no further element starts")
    return {"sweep_id": row.id, "cancelled_jobs": asked, "elements": table}


def report(context, row, *, as_json: bool, as_md: bool) -> None:
    from runjob_core.sweep import _report

    data = _report.build(context.store, row, clusters=context.clusters, hook=context.pm.hook)
    if as_json:
        print_json(data)
    elif as_md:
        click.echo(_report.markdown(data))
    else:
        click.echo(_terminal(data))


def _terminal(report: dict) -> str:
    from runjob_core.cli import _plaintable
    from runjob_core.sweep import _report

    width = _plaintable.terminal_width()
    lines = [_report.headline(report)]
    lines += _plaintable.render(*_report.element_rows(report), width=width, whole=("#", "state", "mean"),
                                drop_order=("cost", "median", "values"))
    lines.append(_report.best_line(report))
    for title, part in (("mean score by " + " x ".join(report["sweep"]["varying"]), _report.pivot_rows(report)),
                        ("mean score by category", _report.category_rows(report))):
        if part is not None:
            lines += ["", title] + _plaintable.render(*part, width=width, whole=(), drop_order=())
    return "\n".join(lines)
