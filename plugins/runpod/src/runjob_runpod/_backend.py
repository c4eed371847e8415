"""The RunPod backend: a pod per attempt, rented at provisioning, returned at release.

* provision: find the attempt's pod by its name (a crashed run left one) or create it,
  trying ``gpu_types`` in order while RunPod answers 400 (no capacity) and skipping types
  over ``max_usd_per_hour``; wait for RUNNING and ``ssh.direct``; pin its host key.
* submit: the core has staged the job's files through the pod's transport; start the job
  detached and return.
* poll: one ``GET /pods`` for every job of the cluster, plus one SSH command per running
  pod (exit code, cancel marker, wrapper alive). A pod that is gone, EXITED or ERROR
  under an unfinished job is LOST and ``resumable``. When a job ends, its log, progress
  and results are copied locally (``_state.mirror_root``): the core may release the pod.
* cancel: TERM the job's process group, copy what it left; the core then releases.
* release: terminate the pod (unless ``keep_pod``); idempotent.
* collect: results from the local copy (copied now if the pod is still up).

Every pod runjob creates has a local record (``_state``) from the moment RunPod returns
its id, so the ending of a job survives its pod; ``runjob pods`` (:mod:`runjob_runpod.cli`)
lists the pods still paid for and can return them.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import attrs

from runjob_core.config import parse_duration
from runjob_core.transport import detached
from runjob_core.errors import BackendError, RunjobError, TransportError
from runjob_core.models import (
    ACTIVE_STATES, CANCELLED, COMPLETED, FAILED, LOST, PENDING, RUNNING, TIMEOUT, Artifact, JobStatus, Machine, ResumePlan,
    Submission, TaggedJob,
)
from runjob_runpod import _api, _settings, _ssh, _state

SOURCE = "runjob-runpod"
NAME_PREFIX = "runjob-"
#: How long a pod may take from create to RUNNING with SSH (image pulls take minutes).
PROVISION_TIMEOUT = 900.0


# ---------------------------------------------------------------------- helpers


def settings_for(cluster, context) -> _settings.RunpodSettings:
    cache = context.scratchpad(SOURCE + ":settings")
    key = (cluster.name, cluster.source, repr(cluster.options), cluster.scratch_path)
    if key not in cache:
        cache[key] = _settings.for_cluster(cluster)
    return cache[key]


def machine_of(record: _state.PodRecord) -> Machine:
    return Machine(id=record.pod_id, host=record.ssh_host, port=record.ssh_port or 22, user="root", source=SOURCE,
                   data={"pod_name": record.pod_name, "gpu": f"{record.gpu_count} x {record.gpu_id}",
                         "usd_per_hour": record.cost_per_hour})


def pod_transport(cluster, machine: Machine, context):
    """The transport to *machine* (the core caches it per machine and invocation)."""
    from runjob_runpod._router import PodMachine

    ssh = _ssh.connect(cluster, _settings.identity_file(cluster), machine.id, machine.host, machine.port, machine.user,
                       context.state_dir)
    return PodMachine(ssh, cluster, context)


def client_for(cluster, context, settings: _settings.RunpodSettings | None = None) -> _api.RunpodClient:
    cache = context.scratchpad(SOURCE + ":clients")
    client = cache.get(cluster.name)
    if client is None:
        settings = settings or settings_for(cluster, context)
        where = f"clusters.{cluster.name}.api_key_env in {cluster.source}"
        key = _api.read_api_key(settings.api_key_env, where=where)
        client = cache[cluster.name] = _api.RunpodClient(settings.api_url, key, key_name=settings.api_key_env)
    return client


def pod_name(tag: str, job_name: str) -> str:
    # "runjob:rj-abc:2" -> "runjob-rj-abc-2-<job name>": the tag, findable by prefix.
    return f"{tag_prefix(tag)}{job_name}"[:190]


def tag_prefix(tag: str) -> str:
    return tag.replace(":", "-") + "-"


def _public_key(settings: _settings.RunpodSettings, cluster) -> str:
    private = Path(_settings.identity_file(cluster)).expanduser()
    public = Path(str(private) + ".pub")
    where = f"clusters.{cluster.name}.identity_file in {cluster.source}"
    if not private.is_file():
        raise BackendError(f"SSH key {private} ({where}) does not exist; create one with: ssh-keygen -t ed25519 -f {private}")
    try:
        text = public.read_text().strip()
    except OSError:
        raise BackendError(f"{public} is missing: the public half of {private} ({where}) is what the pod is given; "
                           f"make it with: ssh-keygen -y -f {private} > {public}") from None
    if not text.startswith(("ssh-", "ecdsa-", "sk-")):
        raise BackendError(f"{public} does not hold an OpenSSH public key")
    return text


def create_body(settings: _settings.RunpodSettings, *, name: str, gpu_id: str, gpu_count: int, public_key: str,
                tag: str, volume_path: str = _settings.DEFAULT_SCRATCH) -> dict[str, Any]:
    """A v2 ``CreatePodRequest``."""
    body: dict[str, Any] = {
        "name": name, "image": settings.image, "gpu": {"id": gpu_id, "count": gpu_count},
        "disk": settings.container_disk_gb, "ports": ["22/tcp"],
        "env": {"PUBLIC_KEY": public_key, "RUNJOB_TAG": tag},
    }
    if settings.request_cloud:
        body["cloud"] = settings.request_cloud
    if settings.data_centers:
        body["dataCenterIds"] = list(settings.data_centers)
    if settings.volume_gb is not None:
        body["mounts"] = {"persistent": {"size": settings.volume_gb, "path": volume_path}}
    elif settings.network_volume_id is not None:
        body["mounts"] = {"network": [{"volumeId": settings.network_volume_id, "path": volume_path}]}
    return body


def _gpu_count(job) -> int:
    # A pod is a GPU pod: a job asking for no GPU still gets one of the listed type.
    return max(1, job.resources.gpus)


# ---------------------------------------------------------------------- provision / submit


def provision(job, attempt, cluster, context) -> Machine:
    """The attempt's pod, RUNNING with SSH and its host key pinned (found by name if a
    crashed run already created it: a rerun never rents a second pod)."""
    settings = settings_for(cluster, context)
    client = client_for(cluster, context, settings)
    public_key = _public_key(settings, cluster)
    existing = []
    for found in client.list_pods(name_prefix=tag_prefix(attempt.tag)):
        if found.status in _LIVE:
            existing.append(found)
        elif found.status not in _GONE:
            # This attempt's pod from a crashed run that has stopped since: it still bills
            # its disk and will never run the job.
            client.terminate_pod(found.id)
    if existing:
        pod = existing[0]
        context.event(attempt.job_id, "provisioning", f"pod {pod.id} of this attempt exists ({pod.status}); using it",
                      attempt=attempt.n, source=SOURCE)
    else:
        pod = _create(client, settings, job, attempt, cluster, context, pod_name(attempt.tag, job.name), public_key)
    record = _record_for(pod, attempt, cluster)
    _state.save(context.state_dir, record)
    try:
        pod = _wait_running(client, pod, context, attempt)
        record.ssh_host, record.ssh_port, record.cost_per_hour = pod.ssh_host, pod.ssh_port, pod.cost_per_hour
        record.started_at = time.time()
        _state.save(context.state_dir, record)
        machine = machine_of(record)
        _connect_when_up(context.transport(cluster, machine))
    except BaseException:
        # No Machine reached the core: it cannot release this pod, so it goes here.
        try:
            _terminate(client, record, context, why="provisioning failed")
        except RunjobError as exc:
            context.event(attempt.job_id, "release_failed", f"could not terminate pod {pod.id} ({exc}); it may still cost "
                          "money: run `runjob pods --terminate` or remove it in the RunPod console", attempt=attempt.n,
                          source=SOURCE)
        raise
    return machine


def submit(job, attempt, rendered, cluster, transport, context) -> Submission:
    """Start the staged job on the attempt's pod, detached."""
    machine = attempt.machine
    if machine is None:
        raise BackendError("RunPod: the attempt has no pod (runjob_provision did not run)")
    files = _files(attempt.layout, rendered.script_name, attempt.n)
    limit = parse_duration(job.resources.time) if job.resources.time else None
    started = transport.run_shell(_ssh.start_command(files, attempt.layout.workdir, limit), idempotent=False, timeout=60)
    if not started.ok:
        raise BackendError(f"could not start the job on pod {machine.id}: {started.stderr.strip()[:300]}")
    return attempt.submission(backend="runpod", cluster=cluster.name, backend_job_id=machine.id, source=SOURCE,
                              extra=_extra(machine))


def _extra(machine: Machine) -> dict[str, str]:
    data = machine.data
    return {"pod_id": machine.id, "pod_name": str(data.get("pod_name", "")), "gpu": str(data.get("gpu", "")),
            "usd_per_hour": f"{float(data.get('usd_per_hour') or 0):.4f}"}


_GONE = (_api.TERMINATED,)
_LIVE = (_api.PROVISIONING, _api.STARTING, _api.RUNNING)


def _create(client, settings, job, attempt, cluster, context, name: str, public_key: str) -> _api.Pod:
    count = _gpu_count(job)
    catalog = None
    if settings.max_usd_per_hour is not None:
        catalog = {g.id: g for g in client.gpu_types()}
    refusals: list[str] = []
    for gpu_id in settings.gpu_types:
        if catalog is not None and gpu_id in catalog:
            price = catalog[gpu_id].price(settings.request_cloud) * count
            if price > settings.max_usd_per_hour:
                refusals.append(f"{gpu_id}: ${price:.2f}/h is over max_usd_per_hour={settings.max_usd_per_hour:g}")
                continue
        body = create_body(settings, name=name, gpu_id=gpu_id, gpu_count=count, public_key=public_key, tag=attempt.tag,
                           volume_path=_settings.volume_path(cluster))
        try:
            pod = client.create_pod(body)
        except _api.Rejected as exc:
            refusals.append(f"{gpu_id}: {exc.detail}")
            context.event(attempt.job_id, "provisioning", f"no pod of {count} x {gpu_id}: {exc.detail}; trying the next GPU type",
                          attempt=attempt.n, source=SOURCE)
            continue
        except _api.AccountProblem as exc:
            if exc.status == 403:
                refusals.append(f"{gpu_id}: {exc.detail}")
                continue
            raise
        context.event(attempt.job_id, "provisioning", f"pod {pod.id} created: {count} x {gpu_id} ({name})",
                      attempt=attempt.n, source=SOURCE, pod_id=pod.id, gpu=gpu_id)
        return pod
    message = (f"RunPod placed no pod for {count} GPU(s) of any type in clusters.{cluster.name}.gpu_types: "
               + "; ".join(refusals) + "; add GPU types, set cloud: any, or try again later")
    raise BackendError(message)


def _record_for(pod: _api.Pod, attempt, cluster) -> _state.PodRecord:
    layout = attempt.layout
    return _state.PodRecord(
        tag=attempt.tag, job_id=attempt.job_id, attempt=attempt.n, cluster=cluster.name, pod_id=pod.id,
        pod_name=pod.name, gpu_id=pod.gpu_id, gpu_count=pod.gpu_count, cost_per_hour=pod.cost_per_hour,
        created_at=time.time(), job_dir=layout.job_dir, workdir=layout.workdir, log_path=layout.log_path,
        results_dir=layout.results_dir, progress_path=layout.progress_path,
    )


def _wait_running(client, pod: _api.Pod, context, attempt) -> _api.Pod:
    deadline = time.monotonic() + PROVISION_TIMEOUT
    delay, last = 0.2, None
    while True:
        if pod.status != last:
            last = pod.status
            context.event(attempt.job_id, "provisioning", f"pod {pod.id}: {pod.status}", attempt=attempt.n, source=SOURCE)
        if pod.reachable:
            return pod
        if pod.status in (_api.EXITED, _api.ERROR, _api.TERMINATED):
            raise BackendError(f"pod {pod.id} ended ({pod.status}) before it ran; not submitted")
        if time.monotonic() > deadline:
            raise BackendError(f"pod {pod.id} was not RUNNING with SSH after {PROVISION_TIMEOUT:.0f} s (status {pod.status}); "
                               "it was terminated; try another GPU type or data center")
        time.sleep(delay)
        delay = min(delay * 1.5, 3.0)
        try:
            pod = client.get_pod(pod.id)
        except _api.PodGone:
            raise BackendError(f"pod {pod.id} disappeared while starting; not submitted") from None


def _connect_when_up(transport) -> None:
    """First contact (pins the host key), retried while the pod's sshd comes up."""
    for delay in (0.5, 1.0, 2.0, 4.0, 8.0, 0):
        try:
            transport.run(["true"], timeout=60)
            return
        except TransportError as exc:
            if not delay or "host key" in str(exc):
                raise
            time.sleep(delay)


def _files(layout, script_name: str, attempt: int) -> _ssh.JobFiles:
    return _ssh.JobFiles(job_dir=layout.job_dir, script=f"{layout.job_dir}/{script_name}", log=layout.log_path, attempt=attempt)


def _record_files(record: _state.PodRecord) -> _ssh.JobFiles:
    return _ssh.JobFiles(job_dir=record.job_dir, script="", log=record.log_path, attempt=record.attempt)


# ---------------------------------------------------------------------- reattach


_POD_TAG = re.compile(r"runjob-(rj-[0-9a-z]+)-([1-9][0-9]*)-(.+)")


def list_tagged(cluster, context) -> list[TaggedJob]:
    """Every pod of the account named after a runjob tag and not terminated (one API list):
    the tag and the job's folder come back from the pod's name (:func:`pod_name`)."""
    from runjob_core.staging import scratch_root

    scratch = scratch_root(cluster, None, context.state_dir)
    jobs = []
    for pod in client_for(cluster, context).list_pods(name_prefix=NAME_PREFIX):
        match = _POD_TAG.fullmatch(pod.name)
        if match is None or pod.status in _GONE:
            continue
        job_id, n, name = match.groups()
        machine = None
        if pod.reachable:
            machine = Machine(id=pod.id, host=pod.ssh_host, port=pod.ssh_port or 22, user="root", source=SOURCE,
                              data={"pod_name": pod.name, "gpu": f"{pod.gpu_count} x {pod.gpu_id}",
                                    "usd_per_hour": pod.cost_per_hour})
        jobs.append(TaggedJob(tag=f"runjob:{job_id}:{n}", backend_job_id=pod.id, source=SOURCE,
                              state=RUNNING if pod.reachable else PENDING,
                              job_dir=f"{scratch}/jobs/{name}/{job_id}", machine=machine))
    return jobs


def reattach(job, attempt, tag, cluster, context) -> Submission | None:
    """The pod named after *tag*, if its job was started; else None (the core then
    provisions, which finds the same pod by name, and submits)."""
    client = client_for(cluster, context)
    found = [p for p in client.list_pods(name_prefix=tag_prefix(tag)) if p.status not in _GONE]
    if not found or not found[0].reachable:
        return None
    pod = found[0]
    record = _state.load(context.state_dir, tag) or _record_for(pod, attempt, cluster)
    record.ssh_host, record.ssh_port, record.cost_per_hour = pod.ssh_host, pod.ssh_port, pod.cost_per_hour
    machine = machine_of(record)
    transport = context.transport(cluster, machine)
    state = _ssh.parse_status(transport.run_shell(_ssh.status_command(_record_files(record))).stdout)
    if not state.started:
        return None
    _state.save(context.state_dir, record)
    submission = attempt.submission(backend="runpod", cluster=cluster.name, backend_job_id=pod.id, source=SOURCE,
                                    extra=_extra(machine))
    return attrs.evolve(submission, machine=machine)


# ---------------------------------------------------------------------- poll


def _final(record: _state.PodRecord) -> JobStatus:
    return JobStatus(state=record.final_state, source=SOURCE, exit_code=record.exit_code, reason=record.reason,
                     started_at=record.started_at, ended_at=record.ended_at, node=record.pod_id, resumable=record.resumable)


def _record(context, sub: Submission) -> _state.PodRecord:
    return _state.load(context.state_dir, sub.tag) or _record_from_submission(sub)


def _transport(cluster, record: _state.PodRecord, context):
    return context.transport(cluster, machine_of(record))


def poll(submissions, cluster, context) -> dict[str, JobStatus]:
    if not submissions:
        return {}
    records = {s.backend_job_id: _record(context, s) for s in submissions}
    answer: dict[str, JobStatus] = {}
    open_ones, cancelled = [], []
    for sub in submissions:
        record = records[sub.backend_job_id]
        if record.final_state == CANCELLED and record.terminated_at is not None and not record.gone_confirmed:
            cancelled.append(sub)  # ended by a cancel: confirmed once the API no longer shows the pod live
        elif record.final_state:
            answer[sub.backend_job_id] = _final(record)
        else:
            open_ones.append(sub)
    if not (open_ones or cancelled):
        return answer
    pods = {p.id: p for p in client_for(cluster, context).list_pods(name_prefix=NAME_PREFIX)}
    for sub in cancelled:
        answer[sub.backend_job_id] = _confirm_gone(cluster, records[sub.backend_job_id], pods.get(sub.backend_job_id), context)
    for sub in open_ones:
        record = records[sub.backend_job_id]
        pod = pods.get(sub.backend_job_id)
        status = _status_of(cluster, pod, record, context)
        if status.terminal:
            _finish(cluster, record, status, context, harvest=pod is not None and pod.reachable)
        answer[sub.backend_job_id] = status
    return answer


def _record_from_submission(sub: Submission) -> _state.PodRecord:
    extra, machine = sub.extra, sub.machine
    return _state.PodRecord(
        tag=sub.tag, job_id=sub.job_id, attempt=sub.attempt, cluster=sub.cluster, pod_id=sub.backend_job_id,
        pod_name=extra.get("pod_name", ""), gpu_id=None, gpu_count=0, cost_per_hour=float(extra.get("usd_per_hour", 0) or 0),
        created_at=sub.submitted_at, job_dir=sub.job_dir, workdir=sub.workdir, log_path=sub.log_path,
        results_dir=sub.results_dir, progress_path=sub.progress_path,
        ssh_host=machine.host if machine else None, ssh_port=machine.port if machine else None,
    )


def _confirm_gone(cluster, record: _state.PodRecord, pod, context) -> JobStatus:
    """A cancelled attempt's pod as the API lists it: gone (or stopped) confirms the cancel;
    still live, the terminate is asked again and the attempt is reported as still running."""
    if pod is not None and pod.status not in (_api.EXITED, _api.ERROR, _api.TERMINATED):
        client_for(cluster, context).terminate_pod(record.pod_id)
        return JobStatus(state=RUNNING, source=SOURCE, node=pod.id,
                         reason=f"pod {pod.id} is still {pod.status} per the RunPod API after runjob asked to terminate it")
    record.gone_confirmed = True
    _state.save(context.state_dir, record)
    return _final(record)


def _status_of(cluster, pod, record, context) -> JobStatus:
    # A pod that vanished or stopped under its job is a lost machine; the work can go on
    # on a new pod (from a network volume or the Hub), so it is resumable.
    if pod is None:
        return JobStatus(state=LOST, source=SOURCE, node=record.pod_id, ended_at=time.time(), resumable=True,
                         reason=f"pod {record.pod_id} is gone (terminated outside runjob, or RunPod lost its host)")
    if pod.status in (_api.EXITED, _api.ERROR, _api.TERMINATED):
        return JobStatus(state=LOST, source=SOURCE, node=pod.id, ended_at=time.time(), resumable=True,
                         reason=f"pod {pod.id} is {pod.status} under an unfinished job (stopped by RunPod: balance, host failure "
                                "or reclaim)")
    if not pod.reachable:
        return JobStatus(state=PENDING, source=SOURCE, node=pod.id, reason=f"pod {pod.status}")
    if (record.ssh_host, record.ssh_port) != (pod.ssh_host, pod.ssh_port):
        # A restarted pod has a new port: same pod, same pinned host key.
        record.ssh_host, record.ssh_port = pod.ssh_host, pod.ssh_port
        _state.save(context.state_dir, record)
    # An unreachable pod (or one showing another host key) raises TransportError: the
    # monitor records a transient event for the cycle and tries again.
    result = _transport(cluster, record, context).run_shell(_ssh.status_command(_record_files(record)), timeout=60)
    state = _ssh.parse_status(result.stdout)
    status = detached.decide(state, source=SOURCE, started_at=record.started_at, node=pod.id)
    if status.state == LOST:
        return attrs.evolve(status, reason="the job's process on the pod ended without an exit code (killed)")
    if status.state == PENDING:
        return attrs.evolve(status, reason="starting on the pod")
    return status


def _finish(cluster, record: _state.PodRecord, status: JobStatus, context, *, harvest: bool) -> None:
    """Record the ending and copy what the job left while its pod is up: the core
    releases the pod of an attempt that did not complete right after this cycle."""
    record.final_state, record.exit_code, record.reason = status.state, status.exit_code, status.reason
    record.resumable = status.resumable
    record.ended_at = status.ended_at or time.time()
    if harvest and record.ssh_host:
        _harvest(cluster, record, context)
    record.harvested = True
    _state.save(context.state_dir, record)
    # Everything the job left is home: the pod goes now, whoever collects and whenever
    # (a paid pod must not wait for a `runjob collect` that may never come).
    _return_pod(cluster, record, context, why=f"job {status.state}")


def _return_pod(cluster, record: _state.PodRecord, context, *, why: str) -> None:
    settings = settings_for(cluster, context)
    if settings.keep_pod or record.terminated_at is not None:
        return
    _terminate(client_for(cluster, context, settings), record, context, why=why)


def _harvest(cluster, record: _state.PodRecord, context) -> None:
    """Copy the log, progress file and results of *record*'s job off its pod."""
    mirror = _state.mirror_root(context.state_dir, record.job_id)
    transport = _transport(cluster, record, context)
    for path in (record.log_path, record.progress_path):
        if transport.stat(path) is not None:
            transport.get_file(path, Path(str(mirror) + path))
    from runjob_core import collecting

    local_results = Path(str(mirror) + record.results_dir)
    for info in transport.listdir_recursive(record.results_dir):
        # The job names its files: each lands inside the mirror or not at all (collect then
        # reports what it could not place).
        target, _why = collecting.destination(local_results, info.path)
        if target is not None:
            transport.get_file(f"{record.results_dir.rstrip('/')}/{info.path}", target)


def _terminate(client, record: _state.PodRecord, context, *, why: str) -> None:
    client.terminate_pod(record.pod_id)
    record.terminated_at = time.time()
    _state.save(context.state_dir, record)
    if record.harvested:
        context.scratchpad(SOURCE + ":ended")[record.pod_id] = record
    context.event(record.job_id, "pod_terminated",
                  f"pod {record.pod_id} terminated ({why}); about ${record.accrued_usd():.2f} at ${record.cost_per_hour:.2f}/h",
                  attempt=record.attempt, source=SOURCE, pod_id=record.pod_id, usd=round(record.accrued_usd(), 4))


# ---------------------------------------------------------------------- release


def release(machine: Machine, submission: Submission | None, cluster, reason: str, context) -> None:
    """Terminate the pod (idempotent: a pod already gone is fine), unless ``keep_pod``."""
    record = None
    if submission is not None:
        record = _record(context, submission)
    else:
        record = next((r for r in _state.all_records(context.state_dir) if r.pod_id == machine.id), None)
    settings = settings_for(cluster, context)
    if settings.keep_pod:
        if record is not None:
            context.event(record.job_id, "pod_kept", f"pod {machine.id} kept running (keep_pod: true); it costs "
                          f"${record.cost_per_hour:.2f}/h until you terminate it", attempt=record.attempt, source=SOURCE)
        return
    client = client_for(cluster, context, settings)
    if record is None:
        client.terminate_pod(machine.id)
        return
    if record.terminated_at is None:
        _terminate(client, record, context, why=reason)


# ---------------------------------------------------------------------- cancel


def cancel(submissions, cluster, context) -> list[str]:
    """Stop each job (TERM, then KILL after a grace) and copy what it left; the core then
    releases the pods."""
    done = []
    for sub in submissions:
        record = _record(context, sub)
        if record.final_state:
            done.append(sub.backend_job_id)  # already ended: keep its own ending
            continue
        status = JobStatus(state=CANCELLED, source=SOURCE, ended_at=time.time(), node=record.pod_id, reason="cancelled")
        reachable = False
        if record.ssh_host and record.live:
            try:
                transport = _transport(cluster, record, context)
                transport.run_shell(_ssh.cancel_command(_record_files(record)), timeout=60)
                status = _after_cancel(transport, record) or status
                reachable = True
            except TransportError:
                pass  # the pod is released next either way: that stops the job too
        record.final_state, record.exit_code, record.reason = status.state, status.exit_code, status.reason
        record.ended_at = status.ended_at or time.time()
        if reachable:
            try:
                _harvest(cluster, record, context)
            except TransportError:
                pass  # a log we cannot fetch does not keep a paid pod alive
        record.harvested = True
        _state.save(context.state_dir, record)
        _return_pod(cluster, record, context, why="cancelled")
        done.append(sub.backend_job_id)
    return done


def _after_cancel(transport, record) -> JobStatus | None:
    """Wait (up to the kill grace) for the job to go; its own ending if it beat the cancel."""
    deadline = time.monotonic() + _ssh.KILL_GRACE + 5
    while time.monotonic() < deadline:
        state = _ssh.parse_status(transport.run_shell(_ssh.status_command(_record_files(record))).stdout)
        if state.exit_code is not None and not state.cancelled:
            return detached.decide(state, source=SOURCE, node=record.pod_id)
        if not state.alive:
            return None
        time.sleep(0.3)
    return None


# ---------------------------------------------------------------------- collect


def collect(submission: Submission, status: JobStatus, dest: Path, context) -> list[Artifact]:
    """Copy the pod's results into *dest*. Of a running job (a peek) the copy is taken and the
    pod left as it is: only a harvest after the job ended is final (and lets the pod go)."""
    cluster = context.clusters[submission.cluster]
    record = _state.load(context.state_dir, submission.tag)
    if record is None:
        return []
    if record.live and not record.harvested and record.ssh_host:
        _harvest(cluster, record, context)
        if status.state not in ACTIVE_STATES:
            record.harvested = True
            _state.save(context.state_dir, record)
    source = Path(str(_state.mirror_root(context.state_dir, record.job_id)) + record.results_dir)
    if not source.is_dir():
        return []
    from runjob_core import collecting

    files, copied, rows, problems = collecting.copy_tree(source, dest, SOURCE)
    # What the attempt's pod cost (creation to termination, at RunPod's own price for it).
    usd = round(record.accrued_usd(), 4)
    cost = Artifact(name="pod-cost", kind="cost", location=f"pod {record.pod_id}: ${usd:.2f} at ${record.cost_per_hour:.2f}/h",
                    source=SOURCE, data={"usd": usd, "usd_per_hour": record.cost_per_hour, "pod_id": record.pod_id,
                                         "gpu": f"{record.gpu_count} x {record.gpu_id}"})
    # What the job measured: the GPU peak its log (copied off the pod) reports, beside the estimate
    from runjob_core.estimator import measured

    memory = measured.log_file_artifact(context.store.get_job(record.job_id).spec, cluster,
                                        str(_state.mirror_root(context.state_dir, record.job_id)) + record.log_path, SOURCE)
    extra = [memory] if memory else []
    if not files:
        return [cost, *problems, *extra]
    return [Artifact(name="results", kind="results", location=str(dest), source=SOURCE, rows=rows,
                     data={"files": files, "copied": copied, "from": f"pod {record.pod_id}:{record.results_dir}"}), cost,
            *problems, *extra]


# ---------------------------------------------------------------------- resume


def resume(submission: Submission, status: JobStatus, context) -> ResumePlan | None:
    """How a job continues on a new pod. A pod's own disk goes with the pod: only a network
    volume mounted at scratch_path (or what the job pushed to the Hub) survives. On a
    volume the job folder, results and checkpoints are there again on the new pod, where
    the job finds its checkpoint itself (no pod runs now to look for it)."""
    cluster = context.clusters.get(submission.cluster)
    if cluster is None or status.state not in (LOST, TIMEOUT):
        return None
    settings = settings_for(cluster, context)
    if settings.network_volume_id:
        return ResumePlan(source=SOURCE, reason=f"results and checkpoints are on network volume {settings.network_volume_id}, "
                          f"mounted at {_settings.volume_path(cluster)} on the new pod")
    return ResumePlan(source=SOURCE, reason="the pod's disk went with the pod: the work on it is lost, the new pod starts "
                      "from the beginning (set network_volume_id, or push checkpoints to the Hub, to keep work across pods)")
