"""The RunPod backend: a pod per attempt, rented at provisioning, returned at release.

* provision (:mod:`runjob_runpod._pods`): find the attempt's pod by its name (a crashed run
  left one) or create it, trying ``gpu_types`` in order while RunPod answers 400 (no
  capacity) and skipping types over ``max_usd_per_hour``; wait for RUNNING and
  ``ssh.direct``; pin its host key. What
  runjob needs of the pod later (name, GPU, price, when it was created) is in the returned
  :class:`Machine`'s ``data``, which the core keeps with the attempt.
* submit: the core has staged the job's files through the pod's transport; start the job
  detached and return.
* poll: one ``GET /pods`` for every job of the cluster, plus one SSH command per running
  pod (exit code, cancel marker, wrapper alive). A pod that is gone, EXITED or ERROR
  under an unfinished job is LOST and ``resumable``.
* cancel: TERM the job's process group (KILL after a grace); the next poll confirms it.
* release: terminate the pod and check that the API no longer lists it live (unless
  ``keep_pod``); idempotent. The core calls it right after the attempt ended, once it
  copied the attempt's log, progress and results home
  (:mod:`runjob_core.collecting.harvest`); a paid pod never waits for a collect.
* collect: results through ``context.transport_for(submission)``: that copy once the pod
  is gone, the pod itself for a peek at a running job.

The plugin keeps no file of its own per attempt: the core's store holds the attempt, its
submission and its machine; ``runjob pods`` (:mod:`runjob_runpod.cli`) asks the RunPod API
which pods runjob still pays for. A pod's pinned host key lives as long as the pod.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import attrs

from runjob_core.config import parse_duration
from runjob_core.transport import detached
from runjob_core.errors import BackendError, TransportError
from runjob_core.models import (
    CANCELLED, LOST, PENDING, RUNNING, TIMEOUT, Artifact, JobStatus, Machine, ResumePlan, Submission, TaggedJob,
)
from runjob_runpod import _api, _settings, _ssh
from runjob_runpod._pods import GONE as _GONE, LIVE as _LIVE, NAME_PREFIX, SOURCE, client_for, machine_of, settings_for, tag_prefix


# ---------------------------------------------------------------------- submit


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


def _files(layout, script_name: str, attempt: int) -> _ssh.JobFiles:
    return _ssh.JobFiles(job_dir=layout.job_dir, script=f"{layout.job_dir}/{script_name}", log=layout.log_path, attempt=attempt)


def _sub_files(sub: Submission) -> _ssh.JobFiles:
    return _ssh.JobFiles(job_dir=sub.job_dir, script="", log=sub.log_path, attempt=sub.attempt)


# ---------------------------------------------------------------------- reattach


POD_TAG = re.compile(r"runjob-(rj-[0-9a-z]+)-([1-9][0-9]*)-(.+)")


def list_tagged(cluster, context) -> list[TaggedJob]:
    """Every pod of the account named after a runjob tag and not terminated (one API list):
    the tag and the job's folder come back from the pod's name (:func:`pod_name`)."""
    from runjob_core.staging import scratch_root

    scratch = scratch_root(cluster, None, context.state_dir)
    jobs = []
    for pod in client_for(cluster, context).list_pods(name_prefix=NAME_PREFIX):
        match = POD_TAG.fullmatch(pod.name)
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
    known = attempt.machine.data if attempt.machine is not None else {}
    machine = machine_of(pod, created_at=known.get("created_at") or time.time(), started_at=known.get("started_at"))
    transport = context.transport(cluster, machine)
    state = _ssh.parse_status(transport.run_shell(_ssh.status_command(_files(attempt.layout, "", attempt.n))).stdout)
    if not state.started:
        return None
    submission = attempt.submission(backend="runpod", cluster=cluster.name, backend_job_id=pod.id, source=SOURCE,
                                    extra=_extra(machine))
    return attrs.evolve(submission, machine=machine)


# ---------------------------------------------------------------------- poll


def poll(submissions, cluster, context) -> dict[str, JobStatus]:
    """One API list for every pod, then one SSH status read per running pod. Nothing is
    returned or copied here: the core harvests and releases an attempt that ended."""
    if not submissions:
        return {}
    pods = {p.id: p for p in client_for(cluster, context).list_pods(name_prefix=NAME_PREFIX)}
    return {sub.backend_job_id: _status_of(cluster, pods.get(sub.backend_job_id), sub, context) for sub in submissions}


def _status_of(cluster, pod, sub: Submission, context) -> JobStatus:
    # A pod that vanished or stopped under its job is a lost machine; the work can go on
    # on a new pod (from a network volume or the Hub), so it is resumable.
    if pod is None or pod.status in (_api.EXITED, _api.ERROR, _api.TERMINATED):
        # Its files went with it: this invocation's reads of them find nothing (the core's
        # last log read and copy home), instead of waiting on a vanished host.
        context.scratchpad(SOURCE + ":gone")[sub.backend_job_id] = "gone" if pod is None else pod.status
    stopped = context.scratchpad(SOURCE + ":stopped-by-terminate").get(sub.backend_job_id)
    if stopped and (pod is None or pod.status not in _LIVE):
        # This invocation's cancel could stop the job only by terminating its pod: cancelled.
        return JobStatus(state=CANCELLED, source=SOURCE, node=sub.backend_job_id, ended_at=time.time(), reason=stopped)
    if pod is None:
        return JobStatus(state=LOST, source=SOURCE, node=sub.backend_job_id, ended_at=time.time(), resumable=True,
                         reason=f"pod {sub.backend_job_id} is gone (terminated outside runjob, or RunPod lost its host)")
    if pod.status in (_api.EXITED, _api.ERROR, _api.TERMINATED):
        return JobStatus(state=LOST, source=SOURCE, node=pod.id, ended_at=time.time(), resumable=True,
                         reason=f"pod {pod.id} is {pod.status} under an unfinished job (stopped by RunPod: balance, host failure "
                                "or reclaim)")
    if not pod.reachable:
        return JobStatus(state=PENDING, source=SOURCE, node=pod.id, reason=f"pod {pod.status}")
    # An unreachable pod (or one showing another host key) raises TransportError: the
    # monitor records a transient event for the cycle and tries again.
    result = _pod(cluster, sub, pod, context).run_shell(_ssh.status_command(_sub_files(sub)), timeout=60)
    state = _ssh.parse_status(result.stdout)
    # The attempt's GPU time runs from when its pod was up; an adopted pod's, from its submission.
    started = (sub.machine.data.get("started_at") if sub.machine is not None else None) or sub.submitted_at
    status = detached.decide(state, source=SOURCE, started_at=started, node=pod.id)
    if status.state == LOST:
        return attrs.evolve(status, reason="the job's process on the pod ended without an exit code (killed)")
    if status.state == PENDING:
        return attrs.evolve(status, reason="starting on the pod")
    return status


def _pod(cluster, sub: Submission, pod: _api.Pod | None, context):
    """The transport to *sub*'s pod, at the address the API gives now (a restarted pod has
    a new port: same pod, same pinned host key)."""
    machine = sub.machine or Machine(id=sub.backend_job_id, host=None, port=22, user="root", source=SOURCE)
    if pod is not None and pod.reachable:
        machine = attrs.evolve(machine, host=pod.ssh_host, port=pod.ssh_port or 22)
    return context.transport(cluster, machine)


# ---------------------------------------------------------------------- release


#: After a terminate, how long the API may keep listing the pod live before the release
#: counts as failed (the core then tries again on the next `runjob status`).
TERMINATE_CONFIRM = (0.5, 1.0, 2.0, 4.0)


def release(machine: Machine, submission: Submission | None, cluster, reason: str, context) -> None:
    """Terminate the pod (idempotent: a pod already gone is fine) and check that the API no
    longer lists it live, unless ``keep_pod``. A pod the API still lists live is a
    :class:`BackendError`: the core records the release as failed and asks again."""
    job_id, n = (submission.job_id, submission.attempt) if submission is not None else (None, None)
    settings = settings_for(cluster, context)
    price = float(machine.data.get("usd_per_hour") or 0)
    if settings.keep_pod:
        context.event(job_id, "pod_kept", f"pod {machine.id} kept running (keep_pod: true); it costs "
                      f"${price:.2f}/h until you terminate it", attempt=n, source=SOURCE, pod_id=machine.id)
        return
    client = client_for(cluster, context, settings)
    client.terminate_pod(machine.id)
    for delay in (*TERMINATE_CONFIRM, None):
        try:
            pod = client.get_pod(machine.id)
        except _api.PodGone:
            break
        if pod.status not in _LIVE:
            break
        if delay is None:
            raise BackendError(f"pod {machine.id} is still {pod.status} per the RunPod API after runjob asked to terminate it")
        time.sleep(delay)
        client.terminate_pod(machine.id)
    _ssh.forget_pin(context.state_dir, machine.id)  # the key of a pod that is gone protects nothing
    usd = pod_cost(machine, time.time())
    context.event(job_id, "pod_terminated", f"pod {machine.id} terminated ({reason}); about ${usd:.2f} at ${price:.2f}/h",
                  attempt=n, source=SOURCE, pod_id=machine.id, usd=round(usd, 4))


def pod_cost(machine: Machine, end: float) -> float:
    """What the pod cost from its creation to *end*, at RunPod's price for it."""
    created = machine.data.get("created_at")
    if not created:
        return 0.0
    return float(machine.data.get("usd_per_hour") or 0) * max(0.0, end - float(created)) / 3600.0


# ---------------------------------------------------------------------- cancel


def cancel(submissions, cluster, context) -> list[str]:
    """TERM each job's process group (KILL after a grace); the next poll confirms the job
    ended and the core then harvests and releases its pod. A pod that cannot be reached is
    terminated instead: nothing else would stop its job (this invocation's poll then says
    CANCELLED, not LOST, so it is not resumed)."""
    pods = {p.id: p for p in client_for(cluster, context).list_pods(name_prefix=NAME_PREFIX)}
    done = []
    for sub in submissions:
        pod = pods.get(sub.backend_job_id)
        if pod is None or pod.status not in _LIVE:
            done.append(sub.backend_job_id)  # no pod runs it: the next poll says LOST
            continue
        try:
            if not pod.reachable:
                raise TransportError(f"pod {pod.id} is {pod.status}, not reachable over SSH yet")
            _pod(cluster, sub, pod, context).run_shell(_ssh.cancel_command(_sub_files(sub)), timeout=60)
        except TransportError as exc:
            client_for(cluster, context).terminate_pod(pod.id)
            context.scratchpad(SOURCE + ":stopped-by-terminate")[pod.id] = f"cancelled: pod {pod.id} terminated, unreachable"
            context.event(sub.job_id, "pod_terminated", f"pod {pod.id} terminated to stop its job: it could not be reached "
                          f"({exc})", attempt=sub.attempt, source=SOURCE, pod_id=pod.id)
        done.append(sub.backend_job_id)
    return done


# ---------------------------------------------------------------------- collect


def collect(submission: Submission, status: JobStatus, dest: Path, cluster, context) -> list[Artifact]:
    """Copy the attempt's results into *dest* through ``context.transport_for(submission)``:
    runjob's copy once the pod was returned, the pod itself for a peek at a running job."""
    transport = context.transport_for(submission)
    files, copied, rows, problems = _download(transport, submission.results_dir, dest)
    machine = submission.machine
    artifacts = []
    if machine is not None:
        # What the attempt's pod cost (creation to its release, at RunPod's own price for it).
        released = context.store.attempt(submission.job_id, submission.attempt).released_at
        usd = round(pod_cost(machine, released or time.time()), 4)
        price = float(machine.data.get("usd_per_hour") or 0)
        artifacts.append(Artifact(name="pod-cost", kind="cost", location=f"pod {machine.id}: ${usd:.2f} at ${price:.2f}/h",
                                  source=SOURCE, data={"usd": usd, "usd_per_hour": price, "pod_id": machine.id,
                                                       "gpu": machine.data.get("gpu")}))
    # What the job measured: the GPU peak its log (copied off the pod) reports, beside the estimate.
    from runjob_core.estimator import measured
    from runjob_core.transport import harvested

    if harvested.is_harvested(context.state_dir, submission.tag):
        log = harvested.local_path(harvested.folder(context.state_dir, submission.tag), submission.log_path)
        memory = measured.log_file_artifact(context.store.get_job(submission.job_id).spec, cluster, str(log), SOURCE)
        artifacts += [memory] if memory else []
    if not files:
        return [*artifacts, *problems]
    return [Artifact(name="results", kind="results", location=str(dest), source=SOURCE, rows=rows,
                     data={"files": files, "copied": copied, "from": f"pod {submission.backend_job_id}:{submission.results_dir}"}),
            *artifacts, *problems]


def _download(transport, results_dir: str, dest: Path) -> tuple[list[str], int, int, list[Artifact]]:
    """Every file under *results_dir* into *dest*, each through ``collecting.destination``:
    ``(files, copied, rows, problems)``."""
    from runjob_core import collecting

    root = results_dir.rstrip("/")
    files, copied, rows, problems = [], 0, 0, []
    for info in transport.listdir_recursive(root):
        target, why = collecting.destination(dest, info.path)
        if target is None:
            problems.append(collecting.skipped(info.path, why, SOURCE))
            continue
        files.append(info.path)
        if not (target.is_file() and target.stat().st_size == info.size and target.stat().st_mtime >= info.mtime):
            target.parent.mkdir(parents=True, exist_ok=True)
            transport.get_file(f"{root}/{info.path}", target)
            copied += 1
        rows += collecting.count_rows(target)
    return files, copied, rows, problems


# ---------------------------------------------------------------------- resume


def resume(submission: Submission, status: JobStatus, cluster, context) -> ResumePlan | None:
    """How a job continues on a new pod. A pod's own disk goes with the pod: only a network
    volume mounted at scratch_path (or what the job pushed to the Hub) survives. On a
    volume the job folder, results and checkpoints are there again on the new pod, where
    the job finds its checkpoint itself (no pod runs now to look for it)."""
    if status.state not in (LOST, TIMEOUT):
        return None
    settings = settings_for(cluster, context)
    if settings.network_volume_id:
        return ResumePlan(source=SOURCE, reason=f"results and checkpoints are on network volume {settings.network_volume_id}, "
                          f"mounted at {_settings.volume_path(cluster)} on the new pod")
    return ResumePlan(source=SOURCE, reason="the pod's disk went with the pod: the work on it is lost, the new pod starts "
                      "from the beginning (set network_volume_id, or push checkpoints to the Hub, to keep work across pods)")
