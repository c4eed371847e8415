"""A 200 MB results file through the Git LFS path (Xet off): stored on disk by sha256, downloaded intact."""

from __future__ import annotations

import hashlib

import pytest

from runjob_hub.publish import CardInfo, publish_results, verify_published

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")]

REPO = "runjob-org/big"
SIZE = 200 * 1024 * 1024


def _write_big(path):
    """~200 MB of JSONL rows, written in big blocks (fast)."""
    line = ('{"id": "q-%08d", "prompt": "%s", "response": "%s", "finish_reason": "stop", '
            '"num_output_tokens": 123, "score": 1.0}\n')
    prompt, resp = "p" * 80, "The answer is forty-two. " * 8
    rows = 0
    with open(path, "w") as f:
        size = 0
        while size < SIZE:
            block = "".join(line % (rows + i, prompt, resp) for i in range(10_000))
            f.write(block)
            size += len(block)
            rows += 10_000
    return rows


def test_200mb_through_lfs(hub, tmp_path, h):
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "results.jsonl"
    rows = _write_big(path)
    local_sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.stat().st_size >= SIZE

    res = publish_results(folder, REPO, card=CardInfo(model="m", benchmark="b", job_id="rj-big"),
                          endpoint=hub.url, token=h.token)
    assert res.rows == rows
    entry = hub.files(REPO)["results.jsonl"]
    assert entry.lfs_oid == local_sha and entry.size == path.stat().st_size
    stored = hub.blob_path(entry)
    assert stored.is_relative_to(hub.root / "lfs") and stored.name == local_sha
    assert stored.stat().st_size == path.stat().st_size
    assert hub.count("POST", f"/{'datasets/'}{REPO}.git/info/lfs/objects/batch") == 1
    assert hub.count("PUT", f"/_lfs/{local_sha}") == 1
    assert hub.count("POST", f"/_lfs/{local_sha}/verify") == 1

    import huggingface_hub

    got = huggingface_hub.hf_hub_download(REPO, "results.jsonl", repo_type="dataset", endpoint=hub.url,
                                          token=h.token, cache_dir=tmp_path / "dl")
    h_ = hashlib.sha256()
    with open(got, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h_.update(block)
    assert h_.hexdigest() == local_sha

    v = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=rows, filename="results.jsonl")
    assert v.ok and v.remote_rows == rows

    # publishing the same data again uploads nothing: the LFS object is already there
    publish_results(folder, REPO, card=CardInfo(model="m", benchmark="b", job_id="rj-big2"),
                    endpoint=hub.url, token=h.token)
    assert hub.count("PUT", "/_lfs/") == 1
