"""lm-evaluation-harness output (recorded from a real lm-eval 0.4.13 run of two local tasks on
a tiny model: tests/data/lm_eval_output) read natively: validation, the report and the Hub
all use the same per-sample rows, and the harness's aggregate scores reach the report and
the dataset card."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from runjob_core import readers

RUNJOB = str(Path(sys.executable).parent / "runjob")
RECORDED = Path(__file__).resolve().parents[3] / "tests" / "data" / "lm_eval_output" / "tiny-model"
STDERR = 0.09176629354822471  # lm-eval's sample stderr of a mean of 4 in 20
TASKS = {"tiny_sum": {"acc": 0.2, "acc_stderr": STDERR}, "tiny_gen": {"exact_match": 0.2, "exact_match_stderr": STDERR}}
STAMP = "2026-12-04T17-06-29.037996"


def test_reader_turns_samples_into_rows_and_results_into_task_scores(tmp_path):
    table = readers.read(RECORDED.parent)
    assert table.reader == "lm-eval" and table.tasks == TASKS
    assert len(table.rows) == 40 and len({r["id"] for r in table.rows}) == 40
    gen = next(r for r in table.rows if r["id"] == "tiny_gen/0")
    assert gen == {"id": "tiny_gen/0", "task": "tiny_gen", "doc_id": 0, "filter": "none", "target": "five",
                   "response": "five ", "metric": "exact_match", "score": 1.0, "metrics": {"exact_match": 1.0}}
    # a loglikelihood choice task: the response is the continuation the model scored highest
    choices = {r["id"]: r for r in table.rows if r["task"] == "tiny_sum"}
    assert choices["tiny_sum/0"]["response"] == "five" and choices["tiny_sum/0"]["target"] == "five"
    assert sum(r["score"] for r in choices.values()) == 4 and all(r["metric"] == "acc" for r in choices.values())
    assert readers.read(tmp_path) is None  # a folder without lm-eval's files: read as plain JSONL


def test_a_newer_run_of_a_task_replaces_the_older(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    for path in RECORDED.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    old = json.loads((folder / f"results_{STAMP}.json").read_text())
    old["results"]["tiny_sum"]["acc,none"] = 0.9
    (folder / "results_2026-01-01T00-00-00.000001.json").write_text(json.dumps(old))
    (folder / "samples_tiny_sum_2026-01-01T00-00-00.000001.jsonl").write_text('{"doc_id": 99}\n')
    table = readers.read(tmp_path)
    assert table.tasks["tiny_sum"]["acc"] == 0.2 and len(table.rows) == 40


def run(args, cwd, token, home):
    env = {**os.environ, "HF_TOKEN": token, "HF_HOME": str(home), "HF_HUB_DISABLE_XET": "1", "COLUMNS": "200"}
    return subprocess.run([RUNJOB, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_validation_report_and_hub_see_the_same_rows_and_scores(runjob_home, hub, h, tmp_path):
    """Before: the report read both samples files (40 rows, no score column), validation and
    the Hub's check the larger one (20 rows), and lm-eval's scores appeared nowhere."""
    spec = {"name": "lmeval", "command": f'cp -r {RECORDED} "$RUNJOB_RESULTS/"',
            "upload": {"repo": "tester/lmeval", "endpoint": hub.url}}
    (runjob_home / "lmeval.yaml").write_text(yaml.safe_dump(spec))
    result = run(["run", "lmeval.yaml", "--yes"], runjob_home, h.token, tmp_path / "hf")
    assert result.returncode == 0, result.stdout + result.stderr
    events = json.loads(run(["events", "lmeval", "--json"], runjob_home, h.token, tmp_path / "hf").stdout)
    artifacts = {e["data"]["artifact"]: e["data"] for e in events if e["kind"] == "artifact"}
    assert artifacts["validation"]["rows"] == 40 and artifacts["hub"]["rows"] == 40
    assert artifacts["verified"]["rows"] == 40
    report = json.loads(run(["report", "lmeval", "--json"], runjob_home, h.token, tmp_path / "hf").stdout)
    assert report["tasks"] == TASKS
    assert report["results"]["rows"] == 40 and report["results"]["fields"]["score"] == "score"
    assert report["results"]["score_by_category"]["tiny_gen"] == {"rows": 20, "mean": 0.2}
    assert report["results"]["score"]["mean"] == 0.2
    card = hub.read("tester/lmeval", "README.md").decode()
    assert "## Scores" in card and "| tiny_sum | acc | 0.2 |" in card and "runjob_rows.jsonl" in card
    text = run(["report", "lmeval"], runjob_home, h.token, tmp_path / "hf").stdout
    assert "lm-eval tiny_gen" in text and "exact_match 0.2" in text
