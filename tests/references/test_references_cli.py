"""runjob reference new / list / show / check, through click."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from runjob_core.cli.reference import command


@pytest.fixture
def cli(runjob_home):
    def invoke(*args):
        return CliRunner().invoke(command, list(args), catch_exceptions=False)

    return invoke


def write_job(folder: Path, **fields) -> Path:
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump({"name": "eval", "command": "python eval.py", **fields}))
    return path


def test_new_writes_a_scaffold_and_prints_its_path(cli, runjob_home):
    result = cli("new", "Countdown")
    assert result.exit_code == 0
    assert result.output.strip() == str(runjob_home / ".runjob" / "references" / "countdown.md")
    again = cli("new", "countdown")
    assert again.exit_code == 1 and "already exists" in again.output


def test_new_notes_when_it_shadows_a_shipped_reference(cli):
    result = cli("new", "GSM8K")
    assert result.exit_code == 0 and "runjob ships a reference for GSM8K; yours takes precedence" in result.output


def test_list_json_shows_every_reference_and_what_is_shadowed(cli):
    cli("new", "GSM8K")
    rows = json.loads(cli("list", "--json").output)
    by = {(r["name"], r["source"]): r for r in rows}
    assert ("GSM8K", "runjob-core") in by and ("GSM8K", "project") in by
    assert by[("GSM8K", "runjob-core")]["shadowed_by"] == "GSM8K (project)"
    assert by[("GSM8K", "project")]["shadowed_by"] is None
    assert by[("HumanEval", "runjob-core")]["rules"] >= 1 and "openai_humaneval" in by[("HumanEval", "runjob-core")]["aliases"]


def test_list_table(cli):
    result = cli("list")
    assert result.exit_code == 0 and "LiveCodeBench" in result.output and "runjob-core" in result.output


def test_show_by_alias(cli):
    result = cli("show", "openai/gsm8k")
    assert result.exit_code == 0
    assert result.output.startswith("GSM8K  (runjob-core")
    assert "source: https://arxiv.org/abs/2110.14168" in result.output
    assert "params.num_fewshot: one of 0, 5, 8 [warning]" in result.output
    assert "## Pitfalls" in result.output


def test_show_json(cli):
    data = json.loads(cli("show", "math500", "--json").output)
    assert data["name"] == "MATH-500" and data["metadata"]["expected_max_tokens"]["reasoning"] == 32768
    assert data["rules"][0]["path"] == "data.input" and "## Evaluation method" in data["body"]


def test_show_unknown_is_one_line_error(cli):
    result = cli("show", "no-such-bench")
    assert result.exit_code == 1
    assert "no reference named 'no-such-bench'" in result.output and "runjob reference new no-such-bench" in result.output


def test_check_warnings_exit_zero(cli, runjob_home):
    path = write_job(runjob_home, benchmark="gsm8k", model={"max_tokens": 256}, params={"num_fewshot": 3})
    result = cli("check", "gsm8k", str(path), "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["ok"] is True and data["reference"] == "GSM8K"
    assert {r["path"]: r["ok"] for r in data["results"]} == {"params.num_fewshot": False, "model.max_tokens": False}


def test_check_error_exits_one(cli, runjob_home):
    path = write_job(runjob_home, benchmark="gpqa", params={"shuffle_choices": False})
    result = cli("check", "gpqa-diamond", str(path), "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    assert any(r["path"] == "params.shuffle_choices" and r["severity"] == "error" and not r["ok"] for r in data["results"])
    table = cli("check", "gpqa-diamond", str(path))
    assert table.exit_code == 1 and "ERROR" in table.output


def test_check_with_a_project_reference(cli, runjob_home):
    folder = runjob_home / ".runjob" / "references"
    folder.mkdir(parents=True)
    (folder / "countdown.md").write_text(
        "---\nname: Countdown\nrules:\n  - {path: params.data_source, equals: countdown, why: the reward router keys on it}\n---\n")
    ok = cli("check", "countdown", str(write_job(runjob_home, params={"data_source": "countdown"})))
    assert ok.exit_code == 0
    bad = cli("check", "countdown", str(write_job(runjob_home, params={"data_source": "cd"})), "--json")
    assert bad.exit_code == 1 and json.loads(bad.output)["results"][0]["message"].startswith("params.data_source is 'cd'")


def test_check_reports_a_malformed_reference_and_a_bad_job(cli, runjob_home):
    folder = runjob_home / ".runjob" / "references"
    folder.mkdir(parents=True)
    (folder / "bad.md").write_text("---\nname: Bad\nrules:\n  - {path: params.k, min: x, why: w}\n---\n")
    result = cli("check", "bad", str(write_job(runjob_home)))
    assert result.exit_code == 1 and "min must be a number at $.rules[0].min in" in result.output
    (folder / "bad.md").unlink()
    missing = cli("check", "gsm8k", str(runjob_home / "nope.yaml"))
    assert missing.exit_code == 1 and "file not found" in missing.output


def test_plugin_references_are_listed(cli, monkeypatch):
    from runjob_core.models import Reference

    plugin_ref = Reference(name="Countdown", source="countdown-plugin", aliases=("countdown-3to4",))
    monkeypatch.setattr("runjob_core.cli.reference._plugin_references", lambda: [plugin_ref])
    rows = json.loads(cli("list", "--json").output)
    assert {"name": "Countdown", "source": "countdown-plugin"}.items() <= next(r for r in rows if r["name"] == "Countdown").items()
    assert cli("show", "countdown 3to4").output.startswith("Countdown  (countdown-plugin)")
