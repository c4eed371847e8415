"""runjob pods: the pods runjob rented and still pays for, and a way to return them all."""

from __future__ import annotations

import sys
import time

import click

from runjob_core.cli.output import json_option, print_json, print_table


@click.command("pods")
@click.option("--terminate", is_flag=True, help="Terminate every live pod runjob created (its job ends LOST on the next poll).")
@json_option
def command(terminate: bool, as_json: bool) -> None:
    """List the live pods runjob created on every RunPod cluster, with what they cost so far.

    Asks RunPod itself (one list call per cluster), so a pod is shown even when runjob died
    before it wrote down that it had created it.
    """
    from runjob_core import lifecycle
    from runjob_core.errors import RunjobError
    from runjob_runpod import _backend, _pods

    context = lifecycle.open_context()
    rows, problems = [], []
    try:
        for cluster in [c for c in context.clusters.values() if c.type == "runpod"]:
            try:
                client = _pods.client_for(cluster, context)
                pods = client.list_pods(name_prefix=_pods.NAME_PREFIX)
            except RunjobError as exc:
                problems.append(f"{cluster.name}: {exc}")
                continue
            for pod in pods:
                job_id, machine = _attempt_of(context, pod)
                accrued = _backend.pod_cost(machine, time.time()) if machine is not None else None
                row = {"cluster": cluster.name, "pod": pod.id, "name": pod.name, "status": pod.status,
                       "gpu": f"{pod.gpu_count} x {pod.gpu_id}", "usd_per_hour": pod.cost_per_hour,
                       "usd_so_far": None if accrued is None else round(accrued, 2), "job": job_id, "terminated": False}
                if terminate:
                    client.terminate_pod(pod.id)
                    row["terminated"] = True
                    if job_id is not None:
                        context.event(job_id, "pod_terminated", f"pod {pod.id} terminated by runjob pods --terminate",
                                      source=_pods.SOURCE, pod_id=pod.id)
                rows.append(row)
    finally:
        context.close()
    if as_json:
        print_json({"pods": rows, "problems": problems})
    else:
        if rows:
            print_table("pods runjob created" + (" (terminated now)" if terminate else ""),
                        ["cluster", "pod", "status", "GPU", "$/h", "$ so far", "job"],
                        [[r["cluster"], r["pod"], r["status"], r["gpu"], f"{r['usd_per_hour']:.2f}",
                          "-" if r["usd_so_far"] is None else f"{r['usd_so_far']:.2f}", r["job"] or "-"] for r in rows])
        else:
            click.echo("no live pods created by runjob")
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
    if problems:
        sys.exit(1)


def _attempt_of(context, pod):
    """The job a pod runs (from its name, which carries the attempt's tag) and the machine
    the store keeps for that attempt, when runjob recorded one."""
    from runjob_runpod import _backend

    match = _backend.POD_TAG.fullmatch(pod.name)
    if match is None:
        return None, None
    job_id, n = match.group(1), int(match.group(2))
    # None when the pod's job is not in this project's store (another project rented it).
    attempt = next((a for a in context.store.attempts(job_id) if a.n == n), None)
    return job_id, attempt.machine if attempt is not None else None
