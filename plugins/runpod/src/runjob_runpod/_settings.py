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

The rules across keys (one volume kind, RunPod's 10 GB volume floor, a budget above 0...)
are :meth:`RunpodSettings.problems`, which the core runs when it loads clusters.yaml (the
declared-options contract of :mod:`runjob_core.config.options`); :func:`for_cluster` runs
them again for a cluster built in code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from runjob_core.config.options import ClusterOptions, option, options_of
from runjob_core.errors import ConfigError
from runjob_core.models import ClusterConfig
from runjob_runpod._api import DEFAULT_API_URL

CLOUDS = ("SECURE", "COMMUNITY", "any")
DEFAULT_IMAGE = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
#: RunPod's floor for a pod volume (``PersistentMount.size`` minimum).
MIN_VOLUME_GB = 10
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class RunpodSettings(ClusterOptions):
    """The keys of a ``type: runpod`` cluster (defaults as documented in the README)."""

    api_url: str = option(DEFAULT_API_URL, help="REST v2 base URL (tests point it at their own server)")
    api_key_env: str = option("RUNPOD_API_KEY", help="the environment variable that holds the API key (never the key)")
    gpu_types: tuple[str, ...] = option((), example=["NVIDIA H100 80GB HBM3"],
                                        help="GPU type ids to rent, tried in this order (required)")
    cloud: str = option("SECURE", help="SECURE, COMMUNITY or any (any: either)")
    image: str = option(DEFAULT_IMAGE, help="the pod's container image")
    container_disk_gb: int = option(50, help="the container's disk, in GB")
    volume_gb: int | None = option(None, help="a pod volume mounted at scratch_path (kept while the pod is stopped)")
    network_volume_id: str | None = option(None, help="or an existing network volume mounted there (survives the pod)")
    data_centers: tuple[str, ...] = option((), help="data center ids allowed (e.g. US-TX-3; empty: any)")
    max_usd_per_hour: float | None = option(None, help="refuse a pod dearer than this")
    max_usd_total: float | None = option(None, example=50, help="stop spending past this budget")
    keep_pod: bool = option(False, help="keep the pod after the job is collected or cancelled (default: terminate it)")

    @property
    def request_cloud(self) -> str | None:
        return None if self.cloud == "any" else self.cloud

    def problems(self, cluster: ClusterConfig):
        found = _check(self)
        if cluster.scratch_path is not None and not cluster.scratch_path.startswith("/"):
            found.append(("scratch_path", f"scratch_path on a pod must be absolute (e.g. /workspace), not {cluster.scratch_path!r}"))
        return found

    def describe(self, job):
        gpus = ", ".join(self.gpu_types) or "-"
        budget = f"${self.max_usd_total:g}" if self.max_usd_total is not None else "none"
        return [("GPU types", gpus), ("budget", budget)]


def parse(raw: Mapping[str, Any], *, source: str, path: str) -> RunpodSettings:
    """Structure and check *raw* (the keys at *path* in *source*); raise one
    :class:`ConfigError` listing every problem."""
    from runjob_core.config import structure

    settings = structure(dict(raw), RunpodSettings, source=source, path=path)
    problems = [f"{text} at {path}.{key} in {source}" for key, text in _check(settings)]
    if problems:
        raise ConfigError(source, problems)
    return settings


DEFAULT_IDENTITY = "~/.ssh/id_ed25519"
DEFAULT_SCRATCH = "/workspace"


def for_cluster(cluster: ClusterConfig) -> RunpodSettings:
    """The checked settings of *cluster* (``cluster.options``, structured and checked by the
    core when it loaded clusters.yaml; checked again here, cheaply, for a cluster built in code)."""
    options = cluster.options
    if isinstance(options, RunpodSettings):
        from runjob_core.config import options as _options

        problems = _options.problems(cluster, f"$.clusters.{cluster.name}", cluster.source)
        if problems:
            raise ConfigError(cluster.source, problems)
        return options
    return options_of(cluster, RunpodSettings)


def identity_file(cluster: ClusterConfig) -> str:
    return cluster.identity_file or DEFAULT_IDENTITY


def volume_path(cluster: ClusterConfig) -> str:
    """Where a pod volume is mounted: the job's scratch folder, so that it holds the job."""
    return cluster.scratch_path or DEFAULT_SCRATCH


def _check(s: RunpodSettings) -> list[tuple[str, str]]:
    """The rules of the keys, as (key, what is wrong and how to fix it)."""
    problems: list[tuple[str, str]] = []

    def bad(key: str, text: str) -> None:
        problems.append((key, text))

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
