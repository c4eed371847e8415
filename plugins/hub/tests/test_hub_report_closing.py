"""The mission's closing line through `runjob run` with the (fake) Hub: published, verified,
validated and the dashboard synced, so the report says `Job complete. Artifacts at HF: ...`;
the activity log has a line per artifact step with the Hub URL and revision."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
RUNJOB = str(Path(sys.executable).parent / "runjob")


def run(args, cwd, token, home):
    env = {**os.environ, "HF_TOKEN": token, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1", "COLUMNS": "200"}
    return subprocess.run([RUNJOB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_closing_line_and_activity_log_after_a_published_run(runjob_home, hub, h, tmp_path):
    shutil.copy(REPO / "runjob_core" / "data" / "examples" / "hello.py", runjob_home / "hello.py")
    spec = yaml.safe_load((REPO / "runjob_core" / "data" / "examples" / "hello.yaml").read_text())
    spec["upload"] = {"repo": "tester/hello-results", "endpoint": hub.url}
    (runjob_home / "hello.yaml").write_text(yaml.safe_dump(spec))
    result = run(["run", "hello.yaml", "--yes"], runjob_home, h.token, tmp_path / "hf")
    assert result.returncode == 0, result.stderr
    report = json.loads(run(["report", "hello", "--json"], runjob_home, h.token, tmp_path / "hf").stdout)
    revision = report["closing"]["revision"]
    assert revision and report["closing"]["line"] == f"Job complete. Artifacts at HF: tester/hello-results@{revision}. Dashboard synced."
    assert report["closing"]["line"] in result.stdout  # `runjob run` ends with the report
    rows = [line.split(" | ") for line in (runjob_home / ".runjob" / "activity.md").read_text().splitlines()[4:]]
    steps = [r[2] for r in rows]
    assert steps[0] == "results" and "hub tester/hello-results" in steps and steps[-1] == "dashboard synced"
    hub_row = rows[steps.index("hub tester/hello-results")]
    assert hub_row[3] == "20" and hub_row[6].startswith(hub.url) and hub_row[7] == f"{revision} |"
    last = rows[-1]
    assert last[3:5] == ["20", "-"] and last[5] == "0..1" and last[7] == f"{revision} |"
    assert h.token not in (runjob_home / ".runjob" / "activity.md").read_text()
