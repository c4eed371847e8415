"""Jobs a cluster runs that the store does not know: found by runjob's tag, adopted.

A store that was lost, damaged past reading or deleted forgets the jobs it submitted while
the cluster keeps running them. Each backend that can lists the live jobs carrying a runjob
tag (:func:`runjob_core.hookspecs.runjob_list_tagged`); each job's folder holds
``runjob.json`` (:func:`runjob_core.staging.job_record`), from which the job's record is
rebuilt under its own id, its attempt begun with the tag's number, and the job reattached
by that tag as after a kill mid-submit. Nothing is ever submitted here.

Only the runjob folder that submitted a job adopts it (its ``runjob.json`` names that
folder and host): two projects of one user on one cluster never take each other's jobs.
``runjob status --adopt`` adopts every such job; a submit whose store has nothing for its
spec follows a running job of the same name, kind and spec hash instead of submitting again.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

from attrs import frozen

from runjob_core import _plugin_errors, config, staging
from runjob_core.errors import JobNotFoundError, RunjobError, TransportError
from runjob_core.models import ClusterConfig, Submission, TaggedJob

_TAG = re.compile(r"runjob:(rj-[0-9a-z]+):([1-9][0-9]{0,5})")


@frozen
class Found:
    """A live tagged job that the store does not know."""

    cluster: str
    job: TaggedJob
    job_id: str
    n: int
    record: dict[str, Any] | None   # its runjob.json, when it can be adopted
    why_not: str | None             # why it cannot be adopted here (None: it can)


def untracked(context, clusters: list[ClusterConfig]) -> tuple[list[Found], list[str]]:
    """The live tagged jobs on *clusters* that the store does not know, and one line for
    each cluster that cannot be listed (its backend cannot, or it does not answer)."""
    found: list[Found] = []
    lines: list[str] = []
    for cluster in clusters:
        try:
            listed = list_tagged(context, cluster)
        except TransportError as exc:
            lines.append(f"{cluster.name}: cannot list its jobs now ({exc}); nothing adopted from it")
            continue
        if listed is None:
            lines.append(f"{cluster.name}: the {cluster.type} backend cannot list the jobs runjob submitted there "
                         "(no runjob_list_tagged); nothing adopted from it")
            continue
        found += [item for item in (_unknown(context, cluster, job) for job in listed) if item is not None]
    return found, lines


def list_tagged(context, cluster: ClusterConfig) -> list[TaggedJob] | None:
    """The backend's answer to ``runjob_list_tagged`` for *cluster* (None: it cannot list),
    asked once per command: the jobs this command submits are in its store, so a sweep of
    new specs costs one listing, not one per spec."""
    listings = context.core_memory.tagged_jobs
    if cluster.name not in listings:
        caller = context.hook("runjob_list_tagged", cluster.type)
        listed = None
        if caller.get_hookimpls():
            listed = _plugin_errors.call_first(context, caller, {"cluster": cluster, "context": context},
                                               hook="runjob_list_tagged", blame=cluster.type)
        listings[cluster.name] = None if listed is None else list(listed)
    return listings[cluster.name]


def _unknown(context, cluster: ClusterConfig, tagged: TaggedJob) -> Found | None:
    match = _TAG.fullmatch(tagged.tag or "")
    if match is None:
        return None                     # a comment that looks like a tag and is not one
    job_id, n = match.group(1), int(match.group(2))
    store = context.store
    try:
        store.get_job(job_id)
    except JobNotFoundError:
        pass
    else:
        if any(a.n == n for a in store.attempts(job_id)):
            return None                 # followed already
    record, why_not = _record(context, cluster, tagged, job_id)
    return Found(cluster=cluster.name, job=tagged, job_id=job_id, n=n, record=record, why_not=why_not)


def _record(context, cluster: ClusterConfig, tagged: TaggedJob, job_id: str) -> tuple[dict | None, str | None]:
    """The job's runjob.json, or why it cannot be adopted from here."""
    if not tagged.job_dir:
        return None, "the backend does not know its folder, so its record cannot be rebuilt"
    path = f"{tagged.job_dir.rstrip('/')}/{staging.JOB_RECORD}"
    try:
        text = context.transport(cluster, tagged.machine).read_text(path)
    except (OSError, RunjobError) as exc:
        return None, f"{path} cannot be read ({exc})"
    if text is None:
        return None, f"no {path} (submitted by a runjob without adoption): `runjob` cannot rebuild its record"
    try:
        record = json.loads(text)
        config.job_from_json(json.dumps(record["spec"]))
        same = record["job_id"] == job_id and all(isinstance(record[k], str) for k in ("name", "kind", "spec_hash"))
    except (ValueError, KeyError, TypeError, RunjobError) as exc:
        return None, f"{path} is not a job record runjob can read ({type(exc).__name__}: {exc})"
    if not same:
        return None, f"{path} belongs to another job"
    here = str(Path(context.state_dir).absolute())
    if (record.get("state_dir"), record.get("host")) != (here, socket.gethostname()):
        return None, (f"submitted from {record.get('host')}:{record.get('state_dir')}, not this runjob folder: "
                      "adopt it from there")
    return record, None


def adopt(context, found: Found, *, why: str | None = None) -> tuple[Any, Submission | None]:
    """Rebuild *found*'s job record and reattach its attempt by the tag: (row, submission),
    the submission None when the backend no longer has the job (it ended meanwhile). *why*:
    the event's words (else: found on the cluster, unknown to this store)."""
    from runjob_core import lifecycle

    assert found.record is not None, found.why_not
    record, store = found.record, context.store
    cluster = context.clusters[found.cluster]
    job = config.job_from_json(json.dumps(record["spec"]))
    with store.claim(f"adopt:{found.job_id}"):
        try:
            row = store.get_job(found.job_id)
        except JobNotFoundError:
            store.create_job(job_id=found.job_id, name=record["name"], cluster=cluster.name, backend=cluster.type,
                             spec_json=config.job_to_json(job), spec_hash=record["spec_hash"],
                             spec_path=record.get("spec_path"), kind=record["kind"])
            row = store.get_job(found.job_id)
        attempts = {a.n: a for a in store.attempts(row.id)}
        if found.n in attempts:
            return row, attempts[found.n].submission   # adopted by another runjob meanwhile
        store.begin_attempt(row.id, n=found.n)
        context.event(row.id, "adopted", why or f"{job.name} found on {cluster.name} as {found.job.backend_job_id} "
                      f"({found.job.state}) by its tag {found.job.tag}, unknown to this store: following it",
                      attempt=found.n, backend_job_id=found.job.backend_job_id)
    with store.claim(f"submit:{row.id}"):
        reattached = lifecycle._reattach(context, row, job, cluster, store.attempt(row.id, found.n))
    if isinstance(reattached, Submission):
        if reattached.machine is not None:
            # the attempt's machine, as a provision records it: released after the final collect
            store.update_attempt(row.id, found.n, machine_json=config.record_to_json(reattached.machine))
        return row, reattached
    store.update_attempt(row.id, found.n, state="LOST",
                         reason="ended before it was adopted; its results stay on the cluster")
    return row, None


def follow_running(context, job, cluster: ClusterConfig, spec_hash: str, kind: str):
    """(row, submission) of a running job of this spec that the store does not know, now
    adopted; None when the cluster runs none (or its backend cannot list). Asked only when
    the store knows no job of this name: a store that has the name did not lose it, and an
    edited spec resubmitted costs no listing."""
    try:
        context.store.find_job(job.name)
        return None
    except JobNotFoundError:
        pass
    try:
        listed = list_tagged(context, cluster)
    except _plugin_errors.PluginError:
        return None                     # recorded; the submit goes on as it would have
    for tagged in listed or ():
        found = _unknown(context, cluster, tagged)
        if found is None or found.record is None:
            continue
        record = found.record
        if (record["name"], record["kind"], record["spec_hash"]) != (job.name, kind, spec_hash):
            continue
        row, submission = adopt(context, found, why=f"a job with this spec's tag is running on {cluster.name} "
                                f"({found.job.backend_job_id}, {found.job.tag}), unknown to this store: following it")
        if submission is not None:
            return row, submission
    return None
