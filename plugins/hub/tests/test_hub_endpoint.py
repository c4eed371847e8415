"""HF_ENDPOINT is honoured (issue 19, item 8): read when the command runs, passed explicitly;
--endpoint still overrides it. Through the real `runjob publish` and the fake Hub."""

import json
import os
import subprocess
import sys
from pathlib import Path

RUNJOB = str(Path(sys.executable).parent / "runjob")


def publish(folder, cwd, token, home, *extra, endpoint_env=None):
    env = {**os.environ, "HF_TOKEN": token, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1"}
    if endpoint_env:
        env["HF_ENDPOINT"] = endpoint_env
    return subprocess.run([RUNJOB, "publish", str(folder), "--repo", "tester/by-env", "--json", *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def test_publish_goes_to_hf_endpoint_when_no_endpoint_is_given(runjob_home, hub, h, tmp_path):
    folder = runjob_home / "out"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(5))
    result = publish(folder, runjob_home, h.token, tmp_path / "hf", endpoint_env=hub.url)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["verified"] and data["url"].startswith(hub.url)


def test_an_explicit_endpoint_wins_over_hf_endpoint(runjob_home, hub, h, tmp_path):
    folder = runjob_home / "out"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(5))
    result = publish(folder, runjob_home, h.token, tmp_path / "hf", "--endpoint", hub.url,
                     endpoint_env="http://127.0.0.1:9")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["url"].startswith(hub.url)
