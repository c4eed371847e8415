"""The core's harvest of an ended attempt (runjob_core.collecting.harvest): what it copies
stays inside runjob's copy, whatever the job named its files."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from runjob_core.collecting import harvest
from runjob_core.transport import FileInfo, harvested


class _ListingTransport:
    """A machine whose results folder lists hostile names (as `find -printf '%P\\0'` would)."""

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


def test_hostile_result_names_never_land_outside_the_copy(tmp_path):
    submission = SimpleNamespace(log_path="/workspace/log", progress_path="/workspace/j/progress.json",
                                 results_dir="/workspace/j/results")
    transport = _ListingTransport(["ok.jsonl", "../../escaped.txt", "x\n../escaped.txt", "a/../../escaped.txt",
                                   "sub/fine.jsonl", "/etc/passwd"])
    root = harvested.folder(tmp_path / "state", "runjob:rj-1:1")
    files, _size = harvest._copy(transport, submission, root)
    results = harvested.local_path(root, submission.results_dir).resolve()
    assert files == 3
    assert sorted(p.relative_to(results).as_posix() for p in (f.resolve() for f in transport.fetched)) == [
        "ok.jsonl", "sub/fine.jsonl", "x\n../escaped.txt"]  # a folder named 'x\n..' stays a folder inside
    outside = [p for p in tmp_path.rglob("escaped.txt") if results not in p.resolve().parents]
    assert outside == []


def test_the_copy_serves_reads_and_refuses_everything_else(tmp_path):
    root = harvested.folder(tmp_path, "runjob:rj-1:1")
    log = harvested.local_path(root, "/root/runjob/logs/a.out")
    log.parent.mkdir(parents=True)
    log.write_bytes(b"line 1\nline 2\n")
    copy = harvested.HarvestedCopy(root, "pod-1")
    assert copy.read_from("/root/runjob/logs/a.out", 7) == b"line 2\n"
    assert copy.stat("/root/runjob/logs/a.out").size == 14 and copy.stat("/root/nothing") is None
    assert copy.read_text("/root/nothing") is None
    import pytest

    from runjob_core.errors import TransportError

    with pytest.raises(TransportError, match="machine pod-1 was given back"):
        copy.run(["ls"])
    with pytest.raises(TransportError, match="was given back"):
        copy.put_text("/root/x", "y")
