"""runjob status: jobs and their attempts; active ones are refreshed first."""

from __future__ import annotations

import click

from runjob_core.cli._common import find_job, fmt_duration, fmt_time, json_option, open_context, print_json


@click.command("status")
@click.argument("job", required=False)
@click.option("--no-refresh", is_flag=True, help="Show the stored state without polling.")
@click.option("-n", "--limit", default=20, show_default=True, help="How many recent jobs to list.")
@click.option("--adopt", is_flag=True, help="First adopt the jobs the configured clusters run with runjob's tag that "
              "this store does not know (a lost store's jobs).")
@click.option("--mine", is_flag=True, help="Only the jobs this user created (a state shared by a team).")
@click.option("--user", "user", metavar="NAME", help="Only the jobs user NAME created.")
@click.option("--all", "all_users", is_flag=True, help="Every member's jobs (the default).")
@json_option
def command(job: str | None, no_refresh: bool, limit: int, adopt: bool, mine: bool, user: str | None,
            all_users: bool, as_json: bool) -> None:
    """Show JOB (id or name) with its attempts, or the recent jobs. A sweep's name or id shows
    its elements."""
    from runjob_core import interrupted
    from runjob_core.monitor import Monitor
    from runjob_core.gpu import telemetry as gpu_telemetry
    from runjob_core.collecting import harvest
    from runjob_core.models import ACTIVE_STATES
    context = open_context(as_json, quiet_kinds=("state",))
    try:
        store = context.store
        if job:
            from runjob_core.sweep import _run as _sweeps

            sweep = _sweeps.find(store, job)
            if sweep is not None:
                from runjob_core.cli import _sweep

                _sweep.status(context, sweep, refresh=not no_refresh, as_json=as_json)
                return
        if adopt:
            _adopt(context)
        rows = [find_job(store, job)] if job else store.list_jobs(limit=limit, user=_who_filter(store, mine, user,
                                                                                                    all_users))
        if not no_refresh:
            _say_settled(interrupted.settle(context, rows), as_json)
        # Every listed job's attempts in one query (issue 29: not a few queries per job).
        attempts = store.attempts_of([r.id for r in rows])
        # An ended attempt whose machine is still out (runjob was killed before returning it) is refreshed too.
        unsettled = harvest.unsettled(context, [r.id for r in rows]) if not no_refresh else set()
        active = [r.id for r in rows if r.id in unsettled or any(a.state in ACTIVE_STATES for a in attempts[r.id])]
        if active and not no_refresh:
            before = store.generation()
            Monitor.of(context).cycle(active)  # one cycle: no lease taken unless it has something to record
            if store.generation() != before:  # the cycle, or another process, recorded something
                rows = [store.get_job(r.id) for r in rows]
                attempts = store.attempts_of([r.id for r in rows])
        etas = _etas(store, rows, attempts)
        if as_json:
            gpus = gpu_telemetry.for_statuses(store, attempts)  # two queries for every listed job
            print_json([
                {"id": r.id, "name": r.name, "who": r.who, "kind": r.kind, "cluster": r.cluster, "state": r.state, "outcome": r.outcome,
                 "created_at": r.created_at, "eta": etas.get(r.id),
                 "attempts": [a.__dict__ | {"submission_json": None, **attempt_cost(store, a),
                                            **gpus[(r.id, a.n)]} for a in attempts[r.id]]}
                for r in rows
            ])
            return
        _print_etas(rows, etas, one=bool(job))
        if job:
            row = rows[0]
            click.echo(f"{row.name} ({row.id}, {row.kind}) on {row.cluster}: {row.state}" + (f" - {row.outcome}" if row.outcome else ""))
            attempts = attempts[row.id]
            costs = [attempt_cost(store, a) for a in attempts]
            columns = ["#", "backend id", "state", "exit", "submitted", "elapsed", "step", "rows", "resumed from"]
            gpus = [gpu_telemetry.for_status(store, row.id, a) for a in attempts]  # given, newest use and memory
            priced = any(c for c in costs)
            columns += (["GPUs"] if any(gpus) else []) + ["reason"] + (["machine", "cost"] if priced else [])
            _print(columns, [
                [a.n, a.backend_job_id, a.state, a.exit_code, fmt_time(a.submitted_at),
                 fmt_duration(a.started_at, a.ended_at), a.step, a.rows_done, a.resumed_from]
                + ([gpu_telemetry.status_line(g)] if any(gpus) else []) + [a.reason]
                + ([c.get("machine"), _money(c)] if priced else [])
                for a, c, g in zip(attempts, costs, gpus)
            ], whole=("#", "backend id", "state", "submitted", "cost"), drop_order=("resumed from", "rows", "step", "exit"))
        else:
            _print(["id", "name", "kind", "cluster", "state", "attempts", "created", "outcome"], [
                [r.id, r.name, r.kind, r.cluster, r.state, len(attempts[r.id]), fmt_time(r.created_at), r.outcome]
                for r in rows
            ], whole=("id", "state", "created"), drop_order=("kind", "attempts", "cluster"))
    finally:
        context.close()


def _adopt(context) -> None:
    """Adopt what the clusters run that the store does not know; one line each (stderr)."""
    from runjob_core import adopt

    found, lines = adopt.untracked(context, list(context.clusters.values()))
    for line in lines:
        click.secho(line, err=True, fg="yellow")
    for item in found:
        what = f"{item.cluster}: {item.job.backend_job_id} ({item.job.state}, tag {item.job.tag})"
        if item.why_not is not None:
            click.secho(f"{what} not adopted: {item.why_not}", err=True, fg="yellow")
            continue
        row, submission = adopt.adopt(context, item)
        ended = "" if submission is not None else "; it had ended meanwhile (recorded LOST, its results stay on the cluster)"
        click.echo(f"{what} adopted as {row.name} ({row.id}), attempt {item.n}{ended}", err=True)
    if not found and not lines:
        click.echo(f"nothing to adopt: every runjob job on {', '.join(context.clusters)} is known to this store", err=True)


def _say_settled(settled, as_json: bool) -> None:
    """Attempts an interrupted runjob left SUBMITTING: reattached, or what to do (stderr)."""
    for found in settled:
        click.secho(found.message, err=True, fg=None if found.submission else "yellow")


def _print(columns: list[str], rows: list[list], *, whole: tuple[str, ...], drop_order: tuple[str, ...]) -> None:
    # A plain table: ids and states stay whole at 80 columns, and it costs ~1 ms, not rich's ~250.
    from runjob_core.cli import _plaintable
    from runjob_core.redact import redact

    # Redacted in one pass (each call reads the whole environment for secret values).
    cells = redact("\x00".join("" if value is None else str(value).replace("\x00", "") for row in rows for value in row)).split("\x00")
    rows = [cells[i:i + len(columns)] for i in range(0, len(cells), len(columns))] if rows else []
    lines = _plaintable.render(columns, rows, width=_plaintable.terminal_width(), whole=whole, drop_order=drop_order)
    click.echo("\n".join(lines))


def attempt_cost(store, attempt) -> dict:
    """What an attempt's rented machine cost: the backend's own figure (a ``cost`` artifact)
    once it is known, else its price (``Machine.data["usd_per_hour"]``) times the time since
    it was submitted, up to its release or end. ``{}`` for attempts without a priced machine."""
    if attempt.machine_json is None:  # most attempts: no machine record to parse
        return {}
    machine = attempt.machine
    price = machine.data.get("usd_per_hour")
    billed = [a for a in store.artifacts(attempt.job_id) if a.kind == "cost" and a.attempt == attempt.n]
    if billed and isinstance(billed[-1].data.get("usd"), (int, float)):
        return {"machine": machine.id, "usd_per_hour": price, "usd": billed[-1].data["usd"], "cost_final": True}
    if not isinstance(price, (int, float)) or not attempt.submitted_at:
        return {"machine": machine.id}
    import time

    end = attempt.released_at or attempt.ended_at or time.time()
    return {"machine": machine.id, "usd_per_hour": price, "usd": round(price * max(0.0, end - attempt.submitted_at) / 3600, 4),
            "cost_final": bool(attempt.released_at or attempt.ended_at)}


def _money(cost: dict) -> str:
    if "usd" not in cost:
        return "-"
    so_far = "" if cost.get("cost_final") else " so far"
    return f"${cost['usd']:.2f}{so_far} (${cost['usd_per_hour']:.2f}/h)" if cost.get("usd_per_hour") else f"${cost['usd']:.2f}"


def _etas(store, rows, attempts: dict) -> dict:
    """The ETA of every running job, from its own progress (runjob_core.estimator.eta)."""
    from runjob_core.models import ACTIVE_STATES

    running = [r for r in rows if any(a.state in ACTIVE_STATES for a in attempts[r.id])]
    if not running:
        return {}
    import time

    from runjob_core.estimator.eta import eta_for

    now = time.time()
    found = {r.id: eta_for(store, r, now, attempts=attempts[r.id]) for r in running}
    return {k: v for k, v in found.items() if v}


def _print_etas(rows, etas: dict, *, one: bool) -> None:
    """'eta: 1:05:00 left (...)' for each running job, and its time-limit warning."""
    if not etas:
        return
    from runjob_core.estimator.eta import describe

    for r in rows:
        eta = etas.get(r.id)
        if eta:
            click.echo(f"eta{'' if one else f' of {r.name} ({r.id})'}: {describe(eta)}")
            if eta["warning"]:
                click.secho(f"warning: {'the job' if one else r.name} {eta['warning']}", fg="yellow")


def _who_filter(store, mine: bool, user: str | None, all_users: bool) -> str | None:
    """The user whose jobs to list (None: everyone's), from --mine / --user / --all."""
    from runjob_core.errors import RunjobError

    if sum((mine, user is not None, all_users)) > 1:
        raise RunjobError("runjob status: give one of --mine, --user NAME and --all")
    if mine:
        return store.who.rpartition("@")[0]
    return user
