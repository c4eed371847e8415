"""runjob's own record of every pod it rented: ``<state dir>/runpod/pods/<tag>.json``.

Written when the pod is created (before anything is staged), updated when its job ends
and when the pod is terminated. It is what lets runjob:

* report a job's ending after its pod is gone (the exit code survives a terminate);
* route file reads of a job to its pod, or to the local copy once the pod is gone;
* list the pods it created and still pays for (``live_records``).

No secret is stored: the pod id, its address, price and the job's paths only.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import attrs


@attrs.define
class PodRecord:
    tag: str
    job_id: str
    attempt: int
    cluster: str
    pod_id: str
    pod_name: str
    gpu_id: str | None
    gpu_count: int
    cost_per_hour: float
    created_at: float
    job_dir: str
    workdir: str
    log_path: str
    results_dir: str
    progress_path: str
    ssh_host: str | None = None
    ssh_port: int | None = None
    started_at: float | None = None
    #: The job's ending, once known: state, exit code, reason, time.
    final_state: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    resumable: bool | None = None
    ended_at: float | None = None
    #: Log, progress and results copied into the mirror (the pod may go now).
    harvested: bool = False
    terminated_at: float | None = None
    #: The API no longer lists the pod as live after a cancel terminated it (the cancel is
    #: confirmed only then: a pod that keeps running keeps costing).
    gone_confirmed: bool = False

    @property
    def live(self) -> bool:
        return self.terminated_at is None

    def accrued_usd(self, now: float | None = None) -> float:
        end = self.terminated_at or now or time.time()
        return self.cost_per_hour * max(0.0, end - self.created_at) / 3600.0


def _folder(state_dir: Path) -> Path:
    return state_dir / "runpod" / "pods"


def mirror_root(state_dir: Path, job_id: str) -> Path:
    """Where a job's remote files are copied once its pod ends (remote path under it)."""
    return state_dir / "runpod" / "mirror" / re.sub(r"[^A-Za-z0-9._-]", "_", job_id)


def _path(state_dir: Path, tag: str) -> Path:
    return _folder(state_dir) / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".json")


def save(state_dir: Path, record: PodRecord) -> None:
    path = _path(state_dir, record.tag)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(attrs.asdict(record), sort_keys=True, indent=1))
    os.replace(tmp, path)


def load(state_dir: Path, tag: str) -> PodRecord | None:
    path = _path(state_dir, tag)
    if not path.is_file():
        return None
    return _from(json.loads(path.read_text()))


def _from(data: dict[str, Any]) -> PodRecord:
    known = {f.name for f in attrs.fields(PodRecord)}
    return PodRecord(**{k: v for k, v in data.items() if k in known})


def all_records(state_dir: Path) -> list[PodRecord]:
    folder = _folder(state_dir)
    if not folder.is_dir():
        return []
    records = []
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(_from(json.loads(path.read_text())))
        except (ValueError, TypeError):
            continue  # a half-written file from a crash; the .tmp rename makes this rare
    return records


def latest_for_job(state_dir: Path, job_id: str) -> PodRecord | None:
    mine = [r for r in all_records(state_dir) if r.job_id == job_id]
    return max(mine, key=lambda r: r.attempt) if mine else None


def live_records(state_dir: Path) -> list[PodRecord]:
    return [r for r in all_records(state_dir) if r.live]
