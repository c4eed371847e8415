"""publish_results / verify_published through the real huggingface_hub client against the fake Hub."""

from __future__ import annotations

import json

import huggingface_hub
import pytest

from runjob_core.errors import RunjobError
from runjob_hub.publish import CardInfo, PublishResult, VerifyResult, publish_results, verify_published

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")  # the client's LFS PUT

REPO = "runjob-org/gsm8k-results"


def _card(**kw):
    base = dict(
        model="meta-llama/Llama-3.1-8B-Instruct", benchmark="GSM8K", job_id="rj-20261202-abc123", attempts=2,
        parameters={"temperature": 0.0, "max_tokens": 512, "n_shots": 8}, cluster="slurm-a100",
        git_commit="0123456789abcdef0123456789abcdef01234567", git_dirty=True,
        script="#!/bin/bash\n#SBATCH --gres=gpu:1\npython eval.py --model llama ```\n",
        columns={"id": "Example id from the GSM8K test split", "score": "1.0 if the final answer is right"},
    )
    base.update(kw)
    return CardInfo(**base)


@pytest.fixture
def results(tmp_path, h):
    folder = tmp_path / "out"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(120))
    (folder / "metrics.json").write_text(json.dumps({"accuracy": 0.66}))
    (folder / "notes.txt").write_text("not a results file")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "tmp.jsonl").write_text("{}\n")
    return folder


def test_push_and_load_back(hub, results, h):
    res = publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    assert isinstance(res, PublishResult)
    assert res.repo_id == REPO and res.revision == "main" and res.rows == 120
    assert res.url == f"{hub.url}/datasets/{REPO}"
    assert set(res.files) == {"results.jsonl", "metrics.json", "README.md"}
    # one commit with data + card, on top of the initial commit
    commits = hub.commits(REPO)
    assert len(commits) == 2 and commits[0].id == res.commit_sha
    assert set(hub.files(REPO)) == {".gitattributes", "results.jsonl", "metrics.json", "README.md"}
    assert hub.repo(REPO).private is True
    assert hub.read(REPO, "results.jsonl") == (results / "results.jsonl").read_bytes()

    v = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=120, filename="results.jsonl")
    assert isinstance(v, VerifyResult)
    assert v.ok and v.remote_rows == 120 and v.local_rows == 120
    assert 3 <= len(v.samples) <= 5
    assert v.samples[0]["id"] == "q-00000" and v.samples[-1]["id"] == "q-00119"
    assert "120 rows" in v.message
    # it really downloaded: resolve was requested after the upload
    assert hub.count("GET", f"/datasets/{REPO}/resolve/main/results.jsonl") == 1
    # and the client can read it back independently too
    api = huggingface_hub.HfApi(endpoint=hub.url, token=h.token)
    assert sorted(api.list_repo_files(REPO, repo_type="dataset")) == [
        ".gitattributes", "README.md", "metrics.json", "results.jsonl"]


def test_republish_is_one_more_commit_and_verify_is_deterministic(hub, results, h):
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    res2 = publish_results(results, REPO, card=_card(attempts=3), endpoint=hub.url, token=h.token,
                           files=["results.jsonl"])
    assert res2.files == ("results.jsonl", "README.md")
    assert len(hub.commits(REPO)) == 3
    a = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=120, filename="results.jsonl")
    b = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=120, filename="results.jsonl")
    assert a.samples == b.samples


def test_card_content(hub, results, h):
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    readme = hub.read(REPO, "README.md").decode()
    front, body = readme.split("\n---\n", 1)
    assert front.startswith("---\n")
    meta = __import__("yaml").safe_load(front[4:])
    assert meta["pretty_name"] == "meta-llama/Llama-3.1-8B-Instruct on GSM8K"
    assert "runjob" in meta["tags"] and "gsm8k" in meta["tags"]
    assert meta["configs"][0]["data_files"][0]["path"] == "results.jsonl"
    assert meta["size_categories"] == ["n<1K"]
    # what the job was
    assert "`meta-llama/Llama-3.1-8B-Instruct`" in body
    assert "GSM8K" in body
    assert "`rj-20261202-abc123` (2 attempts)" in body
    assert "slurm-a100" in body
    assert "0123456789abcdef0123456789abcdef01234567" in body and "uncommitted changes" in body
    assert "| `temperature` | `0.0` |" in body and "| `max_tokens` | `512` |" in body
    assert "120 (in `results.jsonl`)" in body
    # the script, collapsed, with a fence longer than the backticks inside it
    assert "<details>" in body and "</details>" in body
    assert "````bash\n#!/bin/bash\n#SBATCH --gres=gpu:1" in body
    # every column: documented ones with their doc, the rest inferred
    assert "| `id` | string | Example id from the GSM8K test split |" in body
    assert "| `score` | float | 1.0 if the final answer is right |" in body
    for col, typ in [("prompt", "string"), ("response", "string"), ("finish_reason", "string"),
                     ("num_output_tokens", "int")]:
        assert f"| `{col}` | {typ} | *inferred: not documented by the job* |" in body
    assert "Columns marked *inferred*" in body
    assert "no problems found" in body
    # the card is a valid DatasetCard for the client
    card = huggingface_hub.DatasetCard(readme)
    assert card.data.pretty_name == meta["pretty_name"]


def test_card_reports_validation_problems_and_works_without_git(hub, tmp_path, h):
    folder = tmp_path / "o"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(10, score=0.0))
    publish_results(folder, REPO, card=_card(git_commit=None, script=None, columns={}), endpoint=hub.url,
                    token=h.token)
    body = hub.read(REPO, "README.md").decode()
    assert "Source commit" not in body and "<details>" not in body
    assert "**error**: every 'score' is 0" in body


def test_revision_branch_for_canary(hub, results, h):
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    res = publish_results(results, REPO, card=_card(job_id="canary-1"), endpoint=hub.url, token=h.token,
                          revision="canary", files=["results.jsonl"])
    assert res.revision == "canary" and res.url.endswith("/tree/canary")
    assert hub.repo(REPO).branches["canary"] == res.commit_sha
    assert hub.commits(REPO, "main")[0].id != res.commit_sha
    assert "canary-1" in hub.read(REPO, "README.md", revision="canary").decode()
    assert "canary-1" not in hub.read(REPO, "README.md", revision="main").decode()
    # branch already there: exist_ok
    publish_results(results, REPO, card=_card(job_id="canary-2"), endpoint=hub.url, token=h.token, revision="canary")
    v = verify_published(REPO, endpoint=hub.url, token=h.token, revision="canary", local_rows=120,
                         filename="results.jsonl")
    assert v.ok


def test_row_count_mismatch_detected(hub, results, h):
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    hub.drop_row_on_download = True
    v = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=120, filename="results.jsonl")
    assert not v.ok
    assert v.remote_rows == 119 and v.local_rows == 120
    assert "mismatch" in v.message and "119" in v.message and "120" in v.message
    assert v.samples and v.samples[-1]["id"] == "q-00118"


def test_bad_token_is_rejected_without_leaking_it(hub, results, h):
    bad = "hf_thisIsAWrongTokenXYZ987654321"
    with pytest.raises(RunjobError) as ei:
        publish_results(results, REPO, card=_card(), endpoint=hub.url, token=bad)
    text = str(ei.value)
    assert bad not in text and bad not in repr(ei.value)
    assert text == (f"the Hub rejected the token for {hub.url} (401): set HF_TOKEN to a token with write "
                    f"access to runjob-org")
    assert ei.value.__cause__ is None and ei.value.__suppress_context__
    assert "\n" not in text
    # nothing was created or committed
    assert hub.repo(REPO) is None
    assert hub.count("POST", f"/api/datasets/{REPO}/commit") == 0
    assert hub.count("POST", "/api/repos/create") == 1


def test_bad_token_on_existing_repo_makes_no_commit(hub, results, h):
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    before = [c.id for c in hub.commits(REPO)]
    with pytest.raises(RunjobError, match=r"rejected the token .*\(401\)"):
        publish_results(results, REPO, card=_card(attempts=9), endpoint=hub.url, token="hf_wrongwrongwrongwrong")
    assert [c.id for c in hub.commits(REPO)] == before


def test_read_only_token_gets_403_message(hub, results, h):
    with pytest.raises(RunjobError) as ei:
        publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.read_token)
    assert "(403)" in str(ei.value) and "write access to runjob-org" in str(ei.value)
    assert h.read_token not in str(ei.value)
    assert hub.repo(REPO) is None


def test_token_resolution_env_then_saved_login(hub, results, h, monkeypatch, hf_sandbox):
    monkeypatch.setenv("HF_TOKEN", h.token)
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=None)
    monkeypatch.delenv("HF_TOKEN")
    hf_sandbox.mkdir(parents=True, exist_ok=True)
    (hf_sandbox / "token").write_text(h.token)  # what `hf auth login` saves
    res = publish_results(results, REPO, card=_card(attempts=5), endpoint=hub.url, token=None)
    assert len(hub.commits(REPO)) == 3 and res.commit_sha == hub.commits(REPO)[0].id
    # explicit argument wins over the environment
    monkeypatch.setenv("HF_TOKEN", "hf_envTokenThatIsWrong12345")
    publish_results(results, REPO, card=_card(attempts=6), endpoint=hub.url, token=h.token)


def test_no_token_anywhere(hub, results):
    with pytest.raises(RunjobError, match="no Hugging Face token .* set HF_TOKEN"):
        publish_results(results, REPO, card=_card(), endpoint=hub.url, token=None)
    assert hub.requests == []


def test_unreachable_endpoint_names_it(results, h):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.raises(RunjobError) as ei:
        publish_results(results, REPO, card=_card(), endpoint=endpoint, token=h.token)
    assert f"cannot reach the Hub at {endpoint}" in str(ei.value)
    assert h.token not in str(ei.value)
    with pytest.raises(RunjobError, match="cannot reach the Hub at"):
        verify_published(REPO, endpoint=endpoint, token=h.token, local_rows=1, filename="results.jsonl")


def test_verify_missing_repo_and_file(hub, results, h):
    with pytest.raises(RunjobError, match=f"dataset {REPO} not found on"):
        verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=1, filename="results.jsonl")
    publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token)
    with pytest.raises(RunjobError, match="nope.jsonl not found in dataset"):
        verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=1, filename="nope.jsonl")
    with pytest.raises(RunjobError, match="revision 'nobranch' not found"):
        verify_published(REPO, endpoint=hub.url, token=h.token, revision="nobranch", local_rows=1,
                         filename="results.jsonl")


def test_bad_inputs(hub, tmp_path, results, h):
    with pytest.raises(RunjobError, match="no results files"):
        (tmp_path / "empty").mkdir()
        publish_results(tmp_path / "empty", REPO, card=_card(), endpoint=hub.url, token=h.token)
    with pytest.raises(RunjobError, match="results file not found"):
        publish_results(results, REPO, card=_card(), endpoint=hub.url, token=h.token, files=["missing.jsonl"])
    with pytest.raises(RunjobError, match="results folder not found"):
        publish_results(tmp_path / "nope", REPO, card=_card(), endpoint=hub.url, token=h.token)
    assert hub.requests == []


def test_publish_parquet_through_lfs(hub, tmp_path, h):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder = tmp_path / "pq"
    folder.mkdir()
    rows = h.make_rows(300)
    pq.write_table(pa.Table.from_pylist(rows), folder / "results.parquet")
    res = publish_results(folder, REPO, card=_card(), endpoint=hub.url, token=h.token)
    assert res.rows == 300
    assert hub.files(REPO)["results.parquet"].lfs_oid is not None  # went through batch + PUT + verify
    assert hub.count("PUT", "/_lfs/") == 1
    v = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=300, filename="results.parquet")
    assert v.ok and v.samples[0]["id"] == "q-00000" and len(v.samples) == 5
