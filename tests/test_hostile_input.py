"""Hostile or unlucky input (issue 19, items 4, 5 and 7): bounded job files, secrets that
never land anywhere, --json that is JSON. Through the real `runjob` command."""

import json
import subprocess

import pytest
import yaml

from runjob_core import config
from runjob_core.errors import ConfigError
from runjob_core.testing import one_line_error, run_cli as runjob

TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"


# ---------------------------------------------------------------------------- item 4: bounded input


def test_a_job_file_over_the_size_limit_is_refused_in_one_line(runjob_home):
    big = runjob_home / "big.yaml"
    big.write_text("name: big\ncommand: echo hi\nparams:\n" + "".join(f"  k{i}: {'x' * 100}\n" for i in range(12000)))
    line = one_line_error(runjob("render", "big.yaml", cwd=runjob_home))
    assert "big.yaml" in line and "1 MiB" in line


def test_a_cluster_file_over_the_size_limit_is_refused(runjob_home):
    path = runjob_home / ".runjob" / "clusters.yaml"
    path.parent.mkdir()
    path.write_text("clusters:\n" + "".join(f"  c{i}:\n    type: local\n    env: {{A: '{'x' * 200}'}}\n" for i in range(6000)))
    with pytest.raises(ConfigError, match="1 MiB"):
        config.load_clusters(path)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it(runjob_home):
    levels = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        levels.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    (runjob_home / "bomb.yaml").write_text("name: bomb\ncommand: echo hi\nparams:\n" + "".join(f"  {line}\n" for line in levels))
    line = one_line_error(runjob("render", "bomb.yaml", cwd=runjob_home))
    assert "bomb.yaml" in line and "alias" in line


def test_a_job_name_with_a_trailing_newline_is_refused():
    with pytest.raises(ConfigError, match=r"\$\.name"):
        config.job_from_mapping({"name": "hello\n", "command": "echo hi"}, source="job.yaml")


# ---------------------------------------------------------------------------- item 5: secrets


@pytest.mark.parametrize("where, raw", [
    ("$.env.GREETING", {"env": {"GREETING": TOKEN}}),
    ("$.params.auth", {"params": {"auth": f"Bearer {TOKEN}"}}),
    ("$.setup[0]", {"setup": [f"export X={TOKEN}"]}),
    ("$.command", {"command": f"curl -H 'Authorization: Bearer {TOKEN}' https://example.org"}),
])
def test_a_token_written_in_a_spec_is_refused_with_its_key_path(where, raw):
    spec = {"name": "leaky", "command": "echo hi", **raw}
    with pytest.raises(ConfigError) as caught:
        config.job_from_mapping(spec, source="leaky.yaml")
    message = str(caught.value)
    assert where in message and "leaky.yaml" in message and TOKEN not in message
    assert "huggingface-cli login" in message


def test_a_token_printed_by_the_job_is_redacted_everywhere_runjob_shows_it(runjob_home):
    secret_value = "plain-secret-value-9f8e7d"  # not token-shaped: known only as the value of HF_TOKEN
    command = (f"echo 'Traceback (most recent call last):'; echo \"ValueError: bad token {TOKEN[:3]}\"'{TOKEN[3:]}'; "
               "echo \"also $HF_TOKEN\"; exit 1")
    (runjob_home / "leak.yaml").write_text(yaml.safe_dump({"name": "leak", "command": command}))
    env = {"HF_TOKEN": secret_value}
    run = runjob("run", "leak.yaml", "--yes", cwd=runjob_home, env=env)
    assert run.returncode == 1
    outputs = {
        "run": run.stdout + run.stderr,
        "report": runjob("report", "leak", "--json", cwd=runjob_home, env=env).stdout,
        "status": runjob("status", "leak", "--json", cwd=runjob_home, env=env).stdout,
        "events": runjob("events", "leak", "--json", cwd=runjob_home, env=env).stdout,
        "logs": runjob("logs", "leak", cwd=runjob_home, env=env).stdout,
    }
    for name, text in outputs.items():
        assert TOKEN not in text and secret_value not in text, name
    assert "ValueError: bad token ***" in outputs["logs"]
    raw = runjob("logs", "leak", "--raw", cwd=runjob_home, env=env).stdout
    # The local log file itself is written through the redactor (issue 34 item 6): --raw shows
    # its bytes as they are on disk, and no token reached the disk.
    assert "ValueError: bad token ***" in raw and TOKEN not in raw and secret_value not in raw
    db = subprocess.run(["sqlite3", str(runjob_home / ".runjob" / "state.db"), ".dump"], capture_output=True, text=True).stdout
    assert TOKEN not in db and secret_value not in db


# ---------------------------------------------------------------------------- item 7: --json purity


def test_status_json_is_json_while_the_poll_fails(runjob_home):
    from runjob_core import lifecycle
    from runjob_core.models import ClusterConfig
    from runjob_core.testing import write_clusters_yaml

    # A SLURM cluster nobody listens for: every poll fails with a transient error.
    write_clusters_yaml(runjob_home / ".runjob" / "clusters.yaml",
                        [ClusterConfig(name="gone", type="slurm", host="127.0.0.1", port=1, allow_unknown_host=True)])
    context = lifecycle.open_context()
    try:
        store = context.store
        job = config.job_from_mapping({"name": "waiting", "command": "true", "cluster": "gone"}, source="w.yaml")
        job_id = store.create_job(name="waiting", cluster="gone", backend="slurm", spec_json=config.job_to_json(job),
                                  spec_hash=config.spec_hash(job), spec_path=None)
        attempt = store.begin_attempt(job_id)
        submission = {"job_id": job_id, "attempt": 1, "backend": "slurm", "cluster": "gone", "backend_job_id": "42",
                      "tag": attempt.tag, "job_dir": "/x", "workdir": "/x", "log_path": "/x/log", "results_dir": "/x/r",
                      "checkpoint_dir": "/x/c", "progress_path": "/x/p", "submitted_at": 0.0, "source": "test", "extra": {}}
        store.record_submission(job_id, 1, json.dumps(submission), "42", 0.0)
    finally:
        context.close()
    result = runjob("status", "--json", cwd=runjob_home)
    assert result.returncode == 0, result.stderr
    [shown] = json.loads(result.stdout)  # stdout is the document, and only it
    assert shown["name"] == "waiting"
    assert "poll failed" in result.stderr


def test_events_json_is_one_document_and_jsonl_gives_lines(runjob_home):
    (runjob_home / "ok.yaml").write_text(yaml.safe_dump({"name": "ok", "command": "echo fine"}))
    assert runjob("submit", "ok.yaml", "--yes", cwd=runjob_home).returncode == 0
    document = json.loads(runjob("events", "ok", "--json", cwd=runjob_home).stdout)
    assert isinstance(document, list) and document[0]["kind"] == "created"
    lines = runjob("events", "ok", "--jsonl", cwd=runjob_home).stdout.splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [e["kind"] for e in document]


# ---------------------------------------------------------------------------- item 8: conventions


def test_no_results_says_where_and_how(runjob_home):
    (runjob_home / "empty.yaml").write_text(yaml.safe_dump({"name": "empty", "command": "echo no rows"}))
    result = runjob("run", "empty.yaml", "--yes", cwd=runjob_home)
    assert result.returncode == 1
    text = result.stdout + result.stderr
    assert "$RUNJOB_RESULTS" in text and "ResultsWriter" in text


def test_the_job_script_moves_tmpdir_to_scratch_unless_the_cluster_gives_a_private_one(runjob_home):
    (runjob_home / "t.yaml").write_text(yaml.safe_dump({"name": "t", "command": "echo $TMPDIR"}))
    script = runjob("render", "t.yaml", cwd=runjob_home).stdout
    assert 'export TMPDIR="$RUNJOB_JOB_DIR/tmp"' in script and 'mkdir -p "$TMPDIR"' in script
    clusters = runjob_home / ".runjob" / "clusters.yaml"
    clusters.parent.mkdir(exist_ok=True)
    clusters.write_text(yaml.safe_dump({"clusters": {"local": {"type": "local", "private_tmpdir": True}}}))
    assert "TMPDIR" not in runjob("render", "t.yaml", cwd=runjob_home).stdout.replace("echo $TMPDIR", "")
