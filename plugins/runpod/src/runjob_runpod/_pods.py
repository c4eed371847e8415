"""Renting a pod for an attempt: the cluster's settings and API client, the pod's name (its
attempt's tag, so a rerun finds it), the create request, and :func:`provision`, which finds or
creates the pod, waits for it to run with SSH and pins its host key. What the backend does
with a pod once it has one is in :mod:`runjob_runpod._backend`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from runjob_core.errors import BackendError, RunjobError, TransportError
from runjob_core.models import Machine
from runjob_runpod import _api, _settings, _ssh

SOURCE = "runjob-runpod"
NAME_PREFIX = "runjob-"
#: How long a pod may take from create to RUNNING with SSH (image pulls take minutes).
PROVISION_TIMEOUT = 900.0
#: Pod states: gone for good, and alive (or on its way).
GONE = (_api.TERMINATED,)
LIVE = (_api.PROVISIONING, _api.STARTING, _api.RUNNING)


def settings_for(cluster, context) -> _settings.RunpodSettings:
    cache = context.scratchpad(SOURCE + ":settings")
    key = (cluster.name, cluster.source, repr(cluster.options), cluster.scratch_path)
    if key not in cache:
        cache[key] = _settings.for_cluster(cluster)
    return cache[key]


def machine_of(pod: _api.Pod, *, created_at: float, started_at: float | None = None) -> Machine:
    """The :class:`Machine` of *pod*: its SSH address, and in ``data`` what the core keeps of
    it for later (the price ``runjob status`` multiplies, when it was created and ran)."""
    return Machine(id=pod.id, host=pod.ssh_host, port=pod.ssh_port or 22, user="root", source=SOURCE,
                   data={"pod_name": pod.name, "gpu": f"{pod.gpu_count} x {pod.gpu_id}", "usd_per_hour": pod.cost_per_hour,
                         "created_at": created_at, "started_at": started_at})


def pod_transport(cluster, machine: Machine, context) -> _ssh.PodSSH:
    """The transport to *machine* (the core caches it per machine and invocation)."""
    return _ssh.connect(cluster, _settings.identity_file(cluster), machine.id, machine.host, machine.port, machine.user,
                        context.state_dir, gone=context.scratchpad(SOURCE + ":gone"))


def no_standing_host(cluster):
    """``runjob_transport`` without a machine: a RunPod cluster has no host of its own."""
    raise TransportError(f"RunPod cluster {cluster.name!r} has no standing machine: a pod exists only while a job runs "
                         "on it (its files are read through the job's own pod, or runjob's copy once it ended)")


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


# ---------------------------------------------------------------------- provision


def provision(job, attempt, cluster, context) -> Machine:
    """The attempt's pod, RUNNING with SSH and its host key pinned (found by name if a
    crashed run already created it: a rerun never rents a second pod)."""
    settings = settings_for(cluster, context)
    client = client_for(cluster, context, settings)
    public_key = _public_key(settings, cluster)
    existing = []
    for found in client.list_pods(name_prefix=tag_prefix(attempt.tag)):
        if found.status in LIVE:
            existing.append(found)
        elif found.status not in GONE:
            # This attempt's pod from a crashed run that has stopped since: it still bills
            # its disk and will never run the job.
            client.terminate_pod(found.id)
    if existing:
        pod = existing[0]
        context.event(attempt.job_id, "provisioning", f"pod {pod.id} of this attempt exists ({pod.status}); using it",
                      attempt=attempt.n, source=SOURCE)
    else:
        pod = _create(client, settings, job, attempt, cluster, context, pod_name(attempt.tag, job.name), public_key)
    created_at = time.time()
    try:
        pod = _wait_running(client, pod, context, attempt)
        machine = machine_of(pod, created_at=created_at, started_at=time.time())
        _connect_when_up(context.transport(cluster, machine))
    except BaseException:
        # No Machine reached the core: it cannot release this pod, so it goes here.
        try:
            client.terminate_pod(pod.id)
            context.event(attempt.job_id, "pod_terminated", f"pod {pod.id} terminated (provisioning failed)",
                          attempt=attempt.n, source=SOURCE, pod_id=pod.id)
        except RunjobError as exc:
            context.event(attempt.job_id, "release_failed", f"could not terminate pod {pod.id} ({exc}); it may still cost "
                          "money: run `runjob pods --terminate` or remove it in the RunPod console", attempt=attempt.n,
                          source=SOURCE)
        raise
    return machine


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
