"""The fake Hub itself, driven by the real huggingface_hub client (so plugin tests can rely on it)."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import huggingface_hub
import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub import errors as hf_errors

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")

REPO = "org/data"


@pytest.fixture
def api(hub, h):
    a = HfApi(endpoint=hub.url, token=h.token)
    a.create_repo(REPO, repo_type="dataset", private=True)
    return a


def _raw(hub, path, token=None, method="GET"):
    req = urllib.request.Request(hub.url + path, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_auth_on_every_request(hub, api, h):
    status, headers, _ = _raw(hub, f"/api/datasets/{REPO}")
    assert status == 401 and headers["X-Error-Code"] == "RepoNotFound"
    status, headers, _ = _raw(hub, f"/api/datasets/{REPO}", token="hf_wrong")
    assert status == 401 and headers["X-Error-Message"] == "Invalid credentials in Authorization header"
    status, _, _ = _raw(hub, "/api/whoami-v2")
    assert status == 401
    assert _raw(hub, f"/api/datasets/{REPO}", token=h.token)[0] == 200
    # what the client raises
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        HfApi(endpoint=hub.url, token=False).dataset_info(REPO)
    with pytest.raises(hf_errors.HfHubHTTPError) as ei:
        HfApi(endpoint=hub.url, token="hf_wrong").dataset_info(REPO)
    assert ei.value.response.status_code == 401
    assert HfApi(endpoint=hub.url, token=h.token).whoami()["auth"]["accessToken"]["role"] == "write"
    assert HfApi(endpoint=hub.url, token=h.read_token).whoami()["auth"]["accessToken"]["role"] == "read"
    # the read token can read but not write
    HfApi(endpoint=hub.url, token=h.read_token).dataset_info(REPO)
    with pytest.raises(hf_errors.HfHubHTTPError) as ei:
        HfApi(endpoint=hub.url, token=h.read_token).upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                                repo_id=REPO, repo_type="dataset")
    assert ei.value.response.status_code == 403
    # an unsigned LFS upload URL is refused
    assert _raw(hub, "/_lfs/" + "0" * 64, method="PUT")[0] == 403


def test_create_repo_exist_ok_and_info(hub, api, h):
    url = api.create_repo(REPO, repo_type="dataset", exist_ok=True)
    assert url == f"{hub.url}/datasets/{REPO}"
    with pytest.raises(hf_errors.HfHubHTTPError):
        api.create_repo(REPO, repo_type="dataset")
    info = api.dataset_info(REPO)
    assert info.private and info.sha == hub.commits(REPO)[0].id
    assert [s.rfilename for s in info.siblings] == [".gitattributes"]
    assert api.repo_exists(REPO, repo_type="dataset") and not api.repo_exists("org/nope", repo_type="dataset")


def test_commit_upload_download_tree(hub, api, h, tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "d" / "sub" / "w.bin").write_bytes(b"\0\1\2" * 1000)
    api.upload_folder(folder_path=tmp_path / "d", repo_id=REPO, repo_type="dataset")
    files = hub.files(REPO)
    assert files["sub/w.bin"].lfs_oid == hashlib.sha256(b"\0\1\2" * 1000).hexdigest()
    assert files["a.jsonl"].lfs_oid is None
    assert sorted(api.list_repo_files(REPO, repo_type="dataset")) == [".gitattributes", "a.jsonl", "sub/w.bin"]
    tree = {e.path: e for e in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)}
    assert tree["sub/w.bin"].lfs.sha256 == files["sub/w.bin"].lfs_oid and "sub" in tree
    p = huggingface_hub.hf_hub_download(REPO, "sub/w.bin", repo_type="dataset", endpoint=hub.url, token=h.token,
                                        cache_dir=tmp_path / "c")
    assert open(p, "rb").read() == b"\0\1\2" * 1000
    snap = huggingface_hub.snapshot_download(REPO, repo_type="dataset", endpoint=hub.url, token=h.token,
                                             cache_dir=tmp_path / "c2")
    assert open(f"{snap}/a.jsonl").read() == '{"x": 1}\n'
    with pytest.raises(hf_errors.RemoteEntryNotFoundError):
        huggingface_hub.hf_hub_download(REPO, "nope.txt", repo_type="dataset", endpoint=hub.url, token=h.token,
                                        cache_dir=tmp_path / "c3")
    # re-upload of identical content makes no commit
    n = len(hub.commits(REPO))
    api.upload_folder(folder_path=tmp_path / "d", repo_id=REPO, repo_type="dataset")
    assert len(hub.commits(REPO)) == n
    # commits listing and delete
    api.delete_file("a.jsonl", repo_id=REPO, repo_type="dataset")
    assert "a.jsonl" not in hub.files(REPO)
    titles = [c.title for c in api.list_repo_commits(REPO, repo_type="dataset")]
    assert titles[-1] == "initial commit" and len(titles) == len(hub.commits(REPO))


def test_parent_commit_conflict(hub, api):
    head = hub.commits(REPO)[0].id
    api.create_commit(REPO, repo_type="dataset", operations=[CommitOperationAdd("a.txt", b"1")],
                      commit_message="one", parent_commit=head)
    with pytest.raises(hf_errors.HfHubHTTPError) as ei:
        api.create_commit(REPO, repo_type="dataset", operations=[CommitOperationAdd("b.txt", b"2")],
                          commit_message="two", parent_commit=head)
    assert ei.value.response.status_code == 412


def test_branches_and_revisions(hub, api):
    api.create_branch(REPO, repo_type="dataset", branch="dev")
    api.create_branch(REPO, repo_type="dataset", branch="dev", exist_ok=True)
    api.upload_file(path_or_fileobj=b"dev", path_in_repo="f.txt", repo_id=REPO, repo_type="dataset", revision="dev")
    refs = {b.name for b in api.list_repo_refs(REPO, repo_type="dataset").branches}
    assert refs == {"main", "dev"}
    assert api.file_exists(REPO, "f.txt", repo_type="dataset", revision="dev")
    assert not api.file_exists(REPO, "f.txt", repo_type="dataset")
    sha = hub.repo(REPO).branches["dev"]
    assert [s.rfilename for s in api.dataset_info(REPO, revision=sha).siblings] == [".gitattributes", "f.txt"]
    with pytest.raises(hf_errors.RevisionNotFoundError):
        api.dataset_info(REPO, revision="nope")


def test_range_requests_and_drop_row(hub, api, h):
    api.upload_file(path_or_fileobj=b"0123456789\nabc\n", path_in_repo="r.jsonl", repo_id=REPO,
                    repo_type="dataset")
    path = f"/datasets/{REPO}/resolve/main/r.jsonl"
    req = urllib.request.Request(hub.url + path, headers={"Authorization": f"Bearer {h.token}",
                                                          "Range": "bytes=4-"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 206 and r.read() == b"456789\nabc\n"
        assert r.headers["Content-Range"] == "bytes 4-14/15"
    status, headers, body = _raw(hub, path, token=h.token, method="HEAD")
    assert status == 200 and headers["Content-Length"] == "15" and len(headers["X-Repo-Commit"]) == 40
    assert headers["ETag"] == f'"{hub.files(REPO)["r.jsonl"].oid}"'
    hub.drop_row_on_download = True
    assert _raw(hub, path, token=h.token, method="HEAD")[1]["Content-Length"] == "11"
    assert _raw(hub, path, token=h.token)[2] == b"0123456789\n"


def test_tree_pagination(hub, api):
    hub.tree_page_size = 3
    api.create_commit(REPO, repo_type="dataset", commit_message="many",
                      operations=[CommitOperationAdd(f"f{i:02d}.txt", b"%d" % i) for i in range(10)])
    files = api.list_repo_files(REPO, repo_type="dataset")
    assert len(files) == 11
    assert hub.count("GET", f"/api/datasets/{REPO}/tree/main") == 4


def test_fail_next_and_client_retry_on_lfs_put(hub, api):
    data = b"\0" * 5000
    hub.fail_next("/_lfs/", count=1, status=502, method="PUT")
    api.upload_file(path_or_fileobj=data, path_in_repo="w.bin", repo_id=REPO, repo_type="dataset")
    puts = [r.status for r in hub.requests if r.method == "PUT"]
    assert puts == [502, 200]
    assert hub.read(REPO, "w.bin") == data
    hub.fail_next(f"/api/datasets/{REPO}", count=1, status=500)
    with pytest.raises(hf_errors.HfHubHTTPError):
        api.dataset_info(REPO)
    api.dataset_info(REPO)  # only the next one failed


def test_stop_releases_the_port(tmp_path, h):
    from runjob_core.testing import fakehub

    srv = fakehub.serve(tmp_path / "x", token=h.token)
    url = srv.url
    srv.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/api/whoami-v2", timeout=2)
