"""The whole chain through `runjob run`: a local job, published to the (fake) Hub, loaded back,
validated; and a bad token stops the chain before "done" without leaking the token."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

EXAMPLES = Path(__import__("runjob_core").__file__).parent / "data" / "examples"

RUNJOB = str(Path(sys.executable).parent / "runjob")


def run(args, cwd, token, home):
    env = {**os.environ, "HF_TOKEN": token, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1", "COLUMNS": "200"}
    return subprocess.run([RUNJOB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def setup_job(work: Path, endpoint: str) -> Path:
    shutil.copy(EXAMPLES / "hello.py", work / "hello.py")
    spec = yaml.safe_load((EXAMPLES / "hello.yaml").read_text())
    spec["upload"] = {"repo": "tester/hello-results", "endpoint": endpoint}
    spec["columns"] = {"response": "the toy model's answer", "score": "1.0 if the answer is right"}
    (work / "hello.yaml").write_text(yaml.safe_dump(spec))
    return work / "hello.yaml"


def test_run_publishes_verifies_and_validates(runjob_home, hub, h, tmp_path):
    setup_job(runjob_home, hub.url)
    result = run(["run", "hello.yaml", "--yes"], runjob_home, h.token, tmp_path / "hf")
    assert result.returncode == 0, result.stderr
    files = hub.files("tester/hello-results")
    assert "results.jsonl" in files and "README.md" in files
    card = hub.read("tester/hello-results", "README.md").decode()
    assert "the toy model's answer" in card and "questions" in card
    events = [json.loads(line) for line in run(["events", "hello", "--json"], runjob_home, h.token, tmp_path / "hf").stdout.splitlines()]
    hub_events = [e for e in events if e["kind"] == "artifact" and e["data"].get("artifact") == "hub"]
    assert hub_events and hub_events[0]["data"]["rows"] == 20 and hub_events[0]["data"]["revision"]
    assert any(e["data"].get("artifact") == "verified" for e in events if e["kind"] == "artifact")
    assert h.token not in result.stdout + result.stderr


def test_bad_token_stops_the_chain_and_is_never_printed(runjob_home, hub, h, tmp_path):
    setup_job(runjob_home, hub.url)
    bad = "hf_thisTokenIsWrong0123456789abcdef"
    result = run(["run", "hello.yaml", "--yes"], runjob_home, bad, tmp_path / "hf")
    assert result.returncode == 1
    assert "rejected the token" in result.stdout + result.stderr
    assert bad not in result.stdout + result.stderr
    events = run(["events", "hello", "--json"], runjob_home, bad, tmp_path / "hf").stdout
    assert bad not in events and '"collected"' not in events and "collect_failed" in events
    assert not hub.commits("tester/hello-results") if hub.repo("tester/hello-results") else True


def test_publish_command(runjob_home, hub, h, tmp_path):
    folder = runjob_home / "out"
    h.write_jsonl(folder / "results.jsonl", h.make_rows(12))
    result = run(["publish", str(folder), "--repo", "tester/adhoc", "--endpoint", hub.url, "--json"], runjob_home, h.token,
                 tmp_path / "hf")
    data = json.loads(result.stdout)
    assert result.returncode == 0 and data["verified"] and data["remote_rows"] == 12 and len(data["samples"]) >= 3


def test_incremental_upload_during_a_running_local_job(runjob_home, hub, h, tmp_path):
    (runjob_home / "grow.py").write_text(
        "import time\n"
        "from runjob_core.job import ResultsWriter, uploader\n"
        "up = uploader('results.jsonl')\n"
        "with ResultsWriter('results.jsonl') as out:\n"
        "    for i in range(12):\n"
        "        out.write({'id': i, 'response': 'ok.', 'score': i % 2})\n"
        "        out.sync()\n"
        "        up.maybe_upload()\n"
        "        time.sleep(0.1)\n"
        "print('uploads', up.uploads, 'error', up.last_error)\n"
    )
    spec = {"name": "grow", "command": f"{sys.executable} grow.py",  # a Python with huggingface_hub
            "upload": {"repo": "tester/grow", "endpoint": hub.url, "every": "4 rows"}}
    (runjob_home / "grow.yaml").write_text(yaml.safe_dump(spec))
    result = run(["run", "grow.yaml", "--yes"], runjob_home, h.token, tmp_path / "hf")
    assert result.returncode == 0, result.stderr
    log = run(["logs", "grow"], runjob_home, h.token, tmp_path / "hf").stdout
    assert "error None" in log
    # Partial pushes during the job (every 4 rows), then the final publish at collect.
    assert len(hub.commits("tester/grow")) >= 3


def test_results_event_for_dashboards(runjob_home, hub, h, tmp_path):
    setup_job(runjob_home, hub.url)
    assert run(["run", "hello.yaml", "--yes"], runjob_home, h.token, tmp_path / "hf").returncode == 0
    events = [json.loads(line) for line in run(["events", "hello", "--json", "--kind", "results"], runjob_home, h.token,
                                                tmp_path / "hf").stdout.splitlines()]
    [event] = events
    data = event["data"]
    assert data["rows"] == 20 and data["hub_url"].endswith("tester/hello-results") and data["hub_revision"]
    assert data["score_range"] == [0.0, 1.0]
