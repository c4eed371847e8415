"""A team's report reads results from the Hub when they were published there and the folder
they were collected into is out of reach (issue 27 item 3): two members' working folders and
environments (user, host) sharing one state, real ``runjob`` processes, the real
huggingface_hub client against the fake Hub."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

EXAMPLES = Path(__import__("runjob_core").__file__).parent / "data" / "examples"
RUNJOB = str(Path(sys.executable).parent / "runjob")


def _member(root: Path, user: str, host: str, state: str, token: str, hub_home: Path) -> tuple[Path, dict]:
    folder = root / host
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RUNJOB_HOME",)}
    env.update(RUNJOB_STATE_URL=state, RUNJOB_USER=user, RUNJOB_HOST=host, HF_TOKEN=token, HF_HOME=str(hub_home),
               HF_HUB_DISABLE_XET="1", COLUMNS="200")
    return folder, env


def _run(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([RUNJOB, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_report_on_another_host_reads_the_published_results_from_the_hub(hub, h, tmp_path):
    state = f"sqlite://{tmp_path / 'shared' / 'state.db'}"
    a, a_env = _member(tmp_path, "alice", "hosta", state, h.token, tmp_path / "hf-a")
    b, b_env = _member(tmp_path, "bob", "hostb", state, h.token, tmp_path / "hf-b")
    shutil.copy(EXAMPLES / "hello.py", b / "hello.py")
    spec = yaml.safe_load((EXAMPLES / "hello.yaml").read_text())
    spec["upload"] = {"repo": "tester/team-results", "endpoint": hub.url}
    (b / "hello.yaml").write_text(yaml.safe_dump(spec))
    ran = _run(b, b_env, "run", "hello.yaml", "--yes")  # B runs, collects into B's folder, publishes
    assert ran.returncode == 0, ran.stderr
    collected = (b / "results" / "hello").resolve()
    assert (collected / "results.jsonl").is_file()

    # A reaches B's folder (one machine here): read there, no Hub download.
    downloads = hub.count("GET", "/datasets/tester/team-results/resolve/")
    report = _run(a, a_env, "report", "hello", "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["results"]["folder"] == str(collected)
    assert hub.count("GET", "/datasets/tester/team-results/resolve/") == downloads

    # Out of A's reach: A reads the copy B published, at the commit B's collect recorded.
    collected.rename(collected.with_name("moved-away"))
    report = _run(a, a_env, "report", "hello", "--json")
    assert report.returncode == 0, report.stderr
    results = json.loads(report.stdout)["results"]
    fetched = a / ".runjob" / "fetched"
    assert results["rows"] == 20 and Path(results["folder"]).parent == fetched
    assert results["collected_on"]["fetched"]["from"].startswith(f"{hub.url}/datasets/tester/team-results")
    assert results["score"]["rows"] == 20  # the rows themselves, not a count: the scores read back
    md = _run(a, a_env, "report", "hello", "--md")
    assert (f"20 read from {hub.url}/datasets/tester/team-results (collected on hostb:{collected} by bob@hostb, "
            "out of this host's reach)") in " ".join(md.stdout.split())
    assert h.token not in md.stdout + md.stderr + report.stdout

    # Fetched once: a second report reads A's copy without asking the Hub for the files again.
    downloads = hub.count("GET", "/datasets/tester/team-results/resolve/")
    again = _run(a, a_env, "report", "hello", "--json")
    assert json.loads(again.stdout)["results"]["rows"] == 20
    assert hub.count("GET", "/datasets/tester/team-results/resolve/") == downloads


def test_a_hub_that_refuses_the_token_leaves_the_report_with_one_line(hub, h, tmp_path):
    state = f"sqlite://{tmp_path / 'shared' / 'state.db'}"
    b, b_env = _member(tmp_path, "bob", "hostb", state, h.token, tmp_path / "hf-b")
    a, a_env = _member(tmp_path, "alice", "hosta", state, "hf_wrongToken0123456789abcdef", tmp_path / "hf-a")
    shutil.copy(EXAMPLES / "hello.py", b / "hello.py")
    spec = yaml.safe_load((EXAMPLES / "hello.yaml").read_text())
    spec["upload"] = {"repo": "tester/private-results", "endpoint": hub.url}
    (b / "hello.yaml").write_text(yaml.safe_dump(spec))
    assert _run(b, b_env, "run", "hello.yaml", "--yes").returncode == 0
    collected = (b / "results" / "hello").resolve()
    collected.rename(collected.with_name("moved-away"))
    md = _run(a, a_env, "report", "hello", "--md")
    assert md.returncode == 0, md.stderr
    line = " ".join(md.stdout.split())
    assert f"none here: collected on hostb:{collected} by bob@hostb" in line and "(the published copy:" in line
    assert "hf_wrongToken" not in md.stdout + md.stderr
