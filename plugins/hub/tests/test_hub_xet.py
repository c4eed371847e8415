"""The one test with Xet left on: the fake answers uploadMode "regular" for every file, so the client
never needs the Xet service (hf_xet is installed; without force_regular the upload would go to Xet)."""

from __future__ import annotations

import huggingface_hub
import pytest

from runjob_core.errors import RunjobError
from runjob_hub.publish import CardInfo, publish_results, verify_published

REPO = "runjob-org/xet-on"


def test_xet_on_with_force_regular(hub, tmp_path, h, monkeypatch):
    pytest.importorskip("hf_xet")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", False)
    folder = tmp_path / "out"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(2000))
    (folder / "extra.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 64 + b"PAR1")  # would be LFS/Xet
    card = CardInfo(model="m", benchmark="b", job_id="rj-xet", results_file="results.jsonl")

    # control: without force_regular the client really goes to Xet (which the fake does not implement)
    with pytest.raises(RunjobError, match=r"501 Not Implemented.*xet-write-token"):
        publish_results(folder, REPO, card=card, endpoint=hub.url, token=h.token)
    assert hub.count("GET", f"/api/datasets/{REPO}/xet-write-token/main") >= 1
    assert len(hub.commits(REPO)) == 1  # only the initial commit

    hub.force_regular = True
    before = hub.count(prefix=f"/api/datasets/{REPO}/xet-write-token")
    res = publish_results(folder, REPO, card=card, endpoint=hub.url, token=h.token)
    files = hub.files(REPO)
    assert files["extra.parquet"].lfs_oid is None  # inline, not LFS
    assert hub.count(prefix=f"/api/datasets/{REPO}/xet-write-token") == before
    assert hub.count(prefix="/_lfs/") == 0
    v = verify_published(REPO, endpoint=hub.url, token=h.token, local_rows=2000, filename="results.jsonl")
    assert v.ok and res.rows == 2000
    assert [s["id"] for s in v.samples] == ["q-00000", "q-00500", "q-01000", "q-01499", "q-01999"]
    assert hub.read(REPO, "extra.parquet") == (folder / "extra.parquet").read_bytes()
