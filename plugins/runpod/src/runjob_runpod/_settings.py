"""The RunPod keys of a cluster entry: the schema the backend declares, and its rules.

:class:`RunpodSettings` is the ``options`` class of :func:`runjob_runpod.runjob_backend_info`:
the core structures the entry's keys beside its own (``identity_file``, ``scratch_path``...)
into it with the same strict types, key paths and did-you-mean as the core keys, and
hands it over as ``cluster.options``::

    clusters:
      pods:
        type: runpod
        identity_file: ~/.ssh/id_ed25519      # core key; its .pub is the pod's PUBLIC_KEY
        scratch_path: /workspace              # core key; where the job's files live on the pod
        gpu_types: ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"]
        max_usd_total: 50

The cross-field rules (one volume kind, RunPod's 10 GB volume floor, a budget above 0...)
are :func:`check`, run by :func:`for_cluster` on first use: the core has no hook for them
yet, so they are reported when a command first uses the cluster, in the same one-line style.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from runjob_core.errors import ConfigError
from runjob_core.models import ClusterConfig
from runjob_runpod._api import DEFAULT_API_URL

CLOUDS = ("SECURE", "COMMUNITY", "any")
DEFAULT_IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
#: RunPod's floor for a pod volume (``PersistentMount.size`` minimum).
MIN_VOLUME_GB = 10
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class RunpodSettings:
    """The keys of a ``type: runpod`` cluster (defaults as documented in the README)."""

    #: REST v2 base URL (tests point it at their own server).
    api_url: str = DEFAULT_API_URL
    #: Name of the environment variable that holds the API key (never the key itself).
    api_key_env: str = "RUNPOD_API_KEY"
    #: GPU type ids, tried in this order when one has no capacity.
    gpu_types: tuple[str, ...] = ()
    #: SECURE, COMMUNITY or any (any: the request leaves ``cloud`` out).
    cloud: str = "SECURE"
    image: str = DEFAULT_IMAGE
    container_disk_gb: int = 50
    #: A pod volume mounted at the cluster's scratch_path (kept while the pod is stopped) ...
    volume_gb: int | None = None
    #: ... or an existing network volume mounted there (survives the pod).
    network_volume_id: str | None = None
    data_centers: tuple[str, ...] = ()
    max_usd_per_hour: float | None = None
    max_usd_total: float | None = None
    #: Keep the pod after the job is collected or cancelled (default: terminate it).
    keep_pod: bool = False

    @property
    def request_cloud(self) -> str | None:
        return None if self.cloud == "any" else self.cloud


def parse(raw: Mapping[str, Any], *, source: str, path: str) -> RunpodSettings:
    """Structure and check *raw* (the keys at *path* in *source*); raise one
    :class:`ConfigError` listing every problem."""
    from runjob_core.config import structure

    settings = structure(dict(raw), RunpodSettings, source=source, path=path)
    problems = _check(settings, source, path)
    if problems:
        raise ConfigError(source, problems)
    return settings


DEFAULT_IDENTITY = "~/.ssh/id_ed25519"
DEFAULT_SCRATCH = "/workspace"


def for_cluster(cluster: ClusterConfig) -> RunpodSettings:
    """The checked settings of *cluster* (``cluster.options``, structured by the core)."""
    where = f"$.clusters.{cluster.name}"
    options = cluster.options
    if isinstance(options, RunpodSettings):
        problems = _check(options, cluster.source, where)
        if cluster.scratch_path is not None and not cluster.scratch_path.startswith("/"):
            problems.append(f"scratch_path on a pod must be absolute (e.g. /workspace), not {cluster.scratch_path!r} "
                            f"at {where}.scratch_path in {cluster.source}")
        if problems:
            raise ConfigError(cluster.source, problems)
        return options
    return parse(dict(options or {}), source=cluster.source, path=where)


def identity_file(cluster: ClusterConfig) -> str:
    return cluster.identity_file or DEFAULT_IDENTITY


def volume_path(cluster: ClusterConfig) -> str:
    """Where a pod volume is mounted: the job's scratch folder, so that it holds the job."""
    return cluster.scratch_path or DEFAULT_SCRATCH


def _check(s: RunpodSettings, source: str, path: str) -> list[str]:
    problems: list[str] = []

    def bad(key: str, text: str) -> None:
        problems.append(f"{text} at {path}.{key} in {source}")

    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", s.api_url):
        bad("api_url", f"invalid URL {s.api_url!r}: use https://api.runpod.io/v2")
    if not _ENV_NAME.fullmatch(s.api_key_env):
        # Never echo the value: it may be the key itself, pasted in the wrong place.
        bad("api_key_env", "api_key_env names the environment variable that holds the key (e.g. RUNPOD_API_KEY), "
                           "not the key; put the key in that variable, never in clusters.yaml")
    if not s.gpu_types:
        bad("gpu_types", 'required key missing: list the GPU types to rent, in order of preference '
                         '(e.g. ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"])')
    for i, gpu in enumerate(s.gpu_types):
        if not gpu.strip():
            bad(f"gpu_types[{i}]", "empty GPU type id")
    if len(set(s.gpu_types)) != len(s.gpu_types):
        bad("gpu_types", "a GPU type is listed twice")
    if s.cloud not in CLOUDS:
        bad("cloud", f"cloud must be SECURE, COMMUNITY or any, not {s.cloud!r}")
    if not s.image.strip():
        bad("image", "empty image")
    if s.container_disk_gb < 1:
        bad("container_disk_gb", f"container_disk_gb must be at least 1, not {s.container_disk_gb}")
    if s.volume_gb is not None and s.network_volume_id is not None:
        bad("volume_gb", "volume_gb and network_volume_id exclude each other (a pod has one volume): keep one")
    if s.volume_gb is not None and s.volume_gb < MIN_VOLUME_GB:
        bad("volume_gb", f"volume_gb must be at least {MIN_VOLUME_GB} (RunPod's minimum), not {s.volume_gb}")
    if s.network_volume_id is not None and not s.network_volume_id.strip():
        bad("network_volume_id", "empty network_volume_id")
    for i, dc in enumerate(s.data_centers):
        if not re.fullmatch(r"[A-Z]{2}-[A-Z]{2,4}-\d+", dc):
            bad(f"data_centers[{i}]", f"invalid data center id {dc!r}: ids look like US-TX-3 or EU-RO-1")
    for key in ("max_usd_per_hour", "max_usd_total"):
        value = getattr(s, key)
        if value is not None and value <= 0:
            bad(key, f"{key} must be more than 0, not {value:g}")
    return problems
