"""IncrementalUploader while a job appends to its results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys


from runjob_core.job.hub import IncrementalUploader

REPO = "runjob-org/live"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def _append(path, start, n):
    with open(path, "a") as f:
        for i in range(start, start + n):
            f.write(json.dumps({"id": i, "response": f"answer {i}.", "score": 1.0}) + "\n")


def _remote_rows(hub):
    return hub.read(REPO, "results.jsonl").count(b"\n")


def _bump_mtime(path):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_uploads_when_changed_and_skips_when_not(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token)
    assert up.maybe_upload() is False  # no file yet
    _append(path, 0, 10)
    assert up.maybe_upload() is True
    assert up.uploads == 1 and up.uploaded_rows == 10 and up.last_error is None
    assert hub.repo(REPO).private and _remote_rows(hub) == 10
    assert up.last_commit == hub.commits(REPO)[0].id
    n_requests = len(hub.requests)
    assert up.maybe_upload() is False  # unchanged: no request at all
    assert len(hub.requests) == n_requests
    _bump_mtime(path)  # touched, same content: hashed, not uploaded
    assert up.maybe_upload() is False
    assert len(hub.requests) == n_requests and up.uploads == 1
    _append(path, 10, 5)
    assert up.maybe_upload() is True
    assert _remote_rows(hub) == 15 and len(hub.commits(REPO)) == 3  # initial + 2 uploads


def test_partial_last_line_waits_unless_forced(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    _append(path, 0, 3)
    with open(path, "a") as f:
        f.write('{"id": 3, "resp')  # the job is in the middle of writing a row
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token)
    assert up.maybe_upload()
    assert hub.read(REPO, "results.jsonl").endswith(b'"score": 1.0}\n') and up.uploaded_rows == 3
    assert up.maybe_upload(force=True)  # end of job: everything
    assert hub.read(REPO, "results.jsonl") == path.read_bytes() and up.uploaded_rows == 4


def test_thresholds_rows_and_seconds(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    clock = Clock()
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token, every_rows=100, every_seconds=60,
                             clock=clock)
    _append(path, 0, 50)
    assert not up.maybe_upload()  # 50 rows, 0 s
    _append(path, 50, 60)
    assert up.maybe_upload()  # 110 new rows
    assert up.uploaded_rows == 110
    _append(path, 110, 10)
    clock.t += 30
    assert not up.maybe_upload()  # 10 rows, 30 s
    clock.t += 31
    assert up.maybe_upload()  # 61 s since the last upload
    assert _remote_rows(hub) == 120
    clock.t += 600
    assert not up.maybe_upload()  # due, but nothing changed


def test_survives_server_errors_and_recovers(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    clock = Clock()
    sleeps = []
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token, max_attempts=3, backoff_seconds=0.5,
                             retry_after_seconds=60, clock=clock, sleep=sleeps.append)
    _append(path, 0, 5)
    assert up.maybe_upload()
    hub.fail_next(f"/api/datasets/{REPO}/commit/", count=100, status=500)
    _append(path, 5, 5)
    assert up.maybe_upload() is False  # did not raise
    assert up.last_error is not None and "500" in up.last_error and hub.url in up.last_error
    assert h.token not in up.last_error and h.token not in repr(up)
    assert up.failures == 1 and sleeps == [0.5, 1.0]  # 3 attempts, bounded exponential backoff
    assert hub.count("POST", f"/api/datasets/{REPO}/commit/") == 4  # 1 ok + 3 failed
    # cooling down: no new attempt before retry_after_seconds
    assert up.maybe_upload() is False and hub.count("POST", f"/api/datasets/{REPO}/commit/") == 4
    clock.t += 61
    assert up.maybe_upload() is False and up.failures == 2  # still down
    hub.clear_failures()
    clock.t += 61
    assert up.maybe_upload() is True
    assert up.last_error is None and _remote_rows(hub) == 10


def test_transient_5xx_absorbed_by_client_backoff(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    _append(path, 0, 5)
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token, sleep=lambda s: None)
    hub.fail_next(f"/api/datasets/{REPO}/preupload/", count=1, status=503)
    assert up.maybe_upload() is True and up.last_error is None
    assert [r.status for r in hub.requests if "/preupload/" in r.path] == [503, 200]


def test_bad_token_is_not_retried_and_does_not_raise(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    _append(path, 0, 5)
    sleeps = []
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token="hf_badbadbadbadbadbad", sleep=sleeps.append)
    assert up.maybe_upload() is False
    assert "rejected the token" in up.last_error and "hf_badbad" not in up.last_error
    assert sleeps == [] and hub.repo(REPO) is None


def test_unreachable_hub(tmp_path, h):
    path = tmp_path / "results.jsonl"
    _append(path, 0, 5)
    up = IncrementalUploader(path, REPO, endpoint="http://127.0.0.1:9", token=h.token, max_attempts=2,
                             sleep=lambda s: None)
    assert up.maybe_upload() is False
    assert up.last_error.startswith("cannot reach the Hub at http://127.0.0.1:9")


def test_revision_branch(hub, tmp_path, h):
    path = tmp_path / "results.jsonl"
    _append(path, 0, 5)
    up = IncrementalUploader(path, REPO, endpoint=hub.url, token=h.token, revision="live",
                             path_in_repo="partial/results.jsonl")
    assert up.maybe_upload()
    assert "partial/results.jsonl" in hub.files(REPO, "live")
    assert "partial/results.jsonl" not in hub.files(REPO, "main")


