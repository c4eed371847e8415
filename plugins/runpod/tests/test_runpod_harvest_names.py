"""Copying a finished pod's files home stays inside runjob's mirror, whatever the job named them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from runjob_core.transport import FileInfo
from runjob_runpod import _backend, _state


class _ListingTransport:
    """A pod whose results folder lists hostile names (as `find -printf '%P\\0'` would)."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.fetched = names, []

    def stat(self, path: str):
        return None

    def listdir_recursive(self, path: str) -> list[FileInfo]:
        return [FileInfo(name, 1, 0.0) for name in self.names]

    def get_file(self, path: str, local: Path) -> None:
        self.fetched.append(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text("{}\n")


def test_hostile_result_names_never_land_outside_the_mirror(tmp_path, monkeypatch):
    record = _state.PodRecord(tag="runjob:rj-1:1", job_id="rj-1", attempt=1, cluster="pods", pod_id="p1", pod_name="n",
                              gpu_id=None, gpu_count=1, cost_per_hour=1.0, created_at=0.0, job_dir="/workspace/j",
                              workdir="/workspace/j", log_path="/workspace/log", results_dir="/workspace/j/results",
                              progress_path="/workspace/j/progress.json")
    transport = _ListingTransport(["ok.jsonl", "../../escaped.txt", "x\n../escaped.txt", "a/../../escaped.txt", "sub/fine.jsonl", "/etc/passwd"])
    monkeypatch.setattr(_backend, "_transport", lambda cluster, rec, context: transport)
    context = SimpleNamespace(state_dir=tmp_path / "state")
    _backend._harvest(None, record, context)
    results = Path(str(_state.mirror_root(context.state_dir, "rj-1")) + record.results_dir).resolve()
    assert sorted(p.relative_to(results).as_posix() for p in (f.resolve() for f in transport.fetched)) == [
        "ok.jsonl", "sub/fine.jsonl", "x\n../escaped.txt"]  # a folder named 'x\n..' stays a folder inside
    outside = [p for p in tmp_path.rglob("escaped.txt") if results not in p.resolve().parents]
    assert outside == []
