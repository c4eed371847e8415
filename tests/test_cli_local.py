"""End to end through the real `runjob` command, on the local backend, with real processes."""

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runjob_core.testing import run_cli, wait_until

REPO = Path(__file__).resolve().parents[1]
RUNJOB = str(Path(sys.executable).parent / "runjob")


def runjob(*args, cwd, check=None, timeout=120, input=None):
    result = run_cli(*args, cwd=cwd, timeout=timeout, input=input)
    if check is not None:
        assert result.returncode == check, (result.stdout, result.stderr)
    return result


@pytest.fixture
def project(runjob_home):
    shutil.copy(REPO / "runjob_core" / "data" / "examples" / "hello.yaml", runjob_home / "hello.yaml")
    shutil.copy(REPO / "runjob_core" / "data" / "examples" / "hello.py", runjob_home / "hello.py")
    return runjob_home


def job_file(folder: Path, name: str, command: str, **extra) -> Path:
    import yaml

    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "command": command, **extra}))
    return path


def status(project, ref):
    return json.loads(runjob("status", ref, "--json", cwd=project, check=0).stdout)[0]


def test_run_hello_end_to_end(project):
    result = runjob("run", "hello.yaml", "--yes", cwd=project, check=0)
    rows = [json.loads(line) for line in (project / "results" / "hello" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == list(range(20))
    assert "Report: hello" in result.stdout and "Samples" in result.stdout and "Anomalies" in result.stdout
    events = json.loads(runjob("events", "hello", "--json", cwd=project, check=0).stdout)
    assert [e["kind"] for e in events if e["kind"] in ("created", "submitted", "collected")] == ["created", "submitted", "collected"]
    report = json.loads(runjob("report", "hello", "--json", cwd=project, check=0).stdout)
    assert report["results"]["rows"] == 20 and report["job"]["state"] == "COMPLETED" and len(report["samples"]) == 3


def test_failing_job_exits_nonzero_with_its_exit_code(project):
    job_file(project, "boom", "echo about to fail; exit 3")
    result = runjob("run", "boom.yaml", "--yes", cwd=project, check=1)
    assert "FAILED" in result.stdout
    attempt = status(project, "boom")["attempts"][0]
    assert (attempt["state"], attempt["exit_code"]) == ("FAILED", 3)
    assert "about to fail" in runjob("logs", "boom", cwd=project, check=0).stdout


def test_submit_then_cancel_kills_the_process_group(project):
    job_file(project, "sleeper", "sleep 300 & echo child=$!; wait")
    out = runjob("submit", "sleeper.yaml", "--yes", cwd=project, check=0).stdout.split()
    job_id = out[0]
    pid = int(out[1].split("-")[1])
    wait_until(lambda: "child=" in runjob("logs", job_id, cwd=project).stdout, what="the job to start")
    child = int(runjob("logs", job_id, cwd=project).stdout.split("child=")[1].split()[0])
    runjob("cancel", job_id, cwd=project, check=0)
    assert status(project, job_id)["attempts"][0]["state"] == "CANCELLED"
    for gone in (pid, child):
        wait_until(lambda: not Path(f"/proc/{gone}").exists() or "Z" in Path(f"/proc/{gone}/stat").read_text().split(")")[1][:3],
                   timeout=15, what=f"process {gone} to end")


def test_killed_monitor_restarts_and_reattaches_without_resubmitting(project):
    job_file(project, "slow", "for i in $(seq 1 30); do echo step $i; sleep 0.2; done; mkdir -p $RUNJOB_RESULTS; "
                              "echo '{\"id\": 1}' > $RUNJOB_RESULTS/out.jsonl")
    first = subprocess.Popen([RUNJOB, "run", "slow.yaml", "--yes"], cwd=project, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    wait_until(lambda: "step 3" in runjob("logs", "slow", cwd=project).stdout, what="the job to run")
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = runjob("run", "slow.yaml", "--yes", cwd=project, check=0)
    assert "already submitted" in again.stderr
    info = status(project, "slow")
    assert len(info["attempts"]) == 1 and info["state"] == "COMPLETED"
    assert len(json.loads(runjob("status", "--json", cwd=project, check=0).stdout)) == 1


def test_watch_once_and_json_events(project):
    job_file(project, "quick", "echo hello-from-quick")
    runjob("submit", "quick.yaml", "--yes", cwd=project, check=0)
    wait_until(lambda: runjob("watch", "quick", "--once", "--json", cwd=project).stdout.count('"state"') or
               status(project, "quick")["state"] == "COMPLETED", what="a state event")
    runjob("watch", "quick", cwd=project, check=0)
    assert status(project, "quick")["state"] == "COMPLETED"


@pytest.mark.parametrize("text, expected", [
    ("name: a\ncommand: [oops\n", "YAML syntax error"),
    ("name: a\ncommand: x\nresourcs: {}\n", "unknown key 'resourcs' at $"),
    ("name: a\ncommand: x\nresources: {gpus: two}\n", "expected an integer, got 'two' at $.resources.gpus"),
    ("name: a\ncommand: x\ncluster: della\n", "unknown cluster 'della' at $.cluster"),
    ("name: 'x; touch PWNED'\ncommand: x\n", "invalid job name"),
])
def test_bad_input_is_one_clear_error_and_leaves_nothing(project, text, expected):
    (project / "bad.yaml").write_text(text)
    result = runjob("run", "bad.yaml", "--yes", cwd=project, check=1)
    assert expected in result.stderr and "bad.yaml" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (project / "PWNED").exists()
    assert json.loads(runjob("status", "--json", cwd=project, check=0).stdout) == []


def test_unknown_backend_type_says_what_to_install(project):
    (project / ".runjob").mkdir(exist_ok=True)
    # A backend ./dev does not install (runjob-runpod now is).
    (project / ".runjob" / "clusters.yaml").write_text("clusters:\n  pods:\n    type: kubernetes\n")
    job_file(project, "gpujob", "nvidia-smi", cluster="pods")
    result = runjob("submit", "gpujob.yaml", "--yes", cwd=project, check=1)
    assert "no backend named 'kubernetes'" in result.stderr and "pip install runjob-kubernetes" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_template_variable_is_a_clear_error(project):
    templates = project / ".runjob" / "templates"
    templates.mkdir(parents=True)
    (templates / "local.sh.j2").write_text('{% extends "base.sbatch.j2" %}{% block header %}# {{ job.nonexistent }}{% endblock %}')
    job_file(project, "tmpl", "echo hi")
    result = runjob("submit", "tmpl.yaml", "--yes", cwd=project, check=1)
    assert "needs a value that is not set" in result.stderr and "nonexistent" in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(runjob("status", "--json", cwd=project, check=0).stdout) == []


def test_hostile_values_reach_the_shell_quoted(project):
    marker = project / "pwned"
    job_file(project, "quoted", 'echo "$GREETING"', env={"GREETING": f"hi; touch {marker}; $(touch {marker})"})
    runjob("run", "quoted.yaml", "--yes", cwd=project)
    assert not marker.exists()
    assert f"hi; touch {marker}; $(touch {marker})" in runjob("logs", "quoted", cwd=project, check=0).stdout


def test_review_without_yes_needs_a_terminal(project):
    job_file(project, "ask", "echo hi")
    result = runjob("submit", "ask.yaml", cwd=project, check=1, input="")
    assert "pass --yes" in result.stderr
    assert json.loads(runjob("status", "--json", cwd=project, check=0).stdout) == []


def test_init_writes_config_and_example_that_runs(runjob_home):
    runjob("init", cwd=runjob_home, check=0)
    assert "type: local" in (runjob_home / ".runjob" / "clusters.yaml").read_text()
    runjob("run", "examples/hello.yaml", "--yes", cwd=runjob_home, check=0)


def test_help_loads_no_plugin_and_every_command_has_help(project):
    probe = (
        "import sys, runjob_core.cli as c\n"
        "sys.argv = ['runjob', '--help']\n"
        "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('pluggy', 'jinja2', 'cattrs', 'paramiko', 'rich', 'runjob_local', 'runjob_slurm', 'runjob_health', 'yaml')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    from runjob_core.cli import COMMANDS

    for name in COMMANDS:
        assert runjob(name, "--help", cwd=project, check=0).stdout.startswith("Usage: runjob")


def test_plugins_json_lists_every_builtin_plugin(project):
    infos = {p["name"]: p for p in json.loads(runjob("plugins", "--json", cwd=project, check=0).stdout)}
    assert infos["local"]["dist"] == "runjob-local" and infos["local"]["is_backend"]
    assert infos["slurm"]["dist"] == "runjob-slurm" and infos["slurm"]["is_backend"]
    assert infos["health"]["dist"] == "runjob-health" and not infos["health"]["is_backend"]


def test_clusters_json_has_builtin_local(project):
    data = json.loads(runjob("clusters", "--json", cwd=project, check=0).stdout)
    assert data["clusters"]["local"]["type"] == "local"


def test_canary_run_has_its_own_results_and_a_verdict(project):
    result = runjob("run", "hello.yaml", "--canary", "--yes", cwd=project, check=0)
    rows = (project / "results" / "hello-canary" / "results.jsonl").read_text().splitlines()
    assert len(rows) == 10  # canary.limit defaults to 10 rows, exposed as RUNJOB_LIMIT
    assert "Canary verdict: GO" in result.stdout
    assert not (project / "results" / "hello").exists()
    report = json.loads(runjob("report", "hello", "--json", cwd=project, check=0).stdout)
    assert report["job"]["kind"] == "canary" and report["go_no_go"]["go"] is True


def test_full_run_after_a_failed_canary_warns_and_asks(project):
    job_file(project, "fragile", 'test -z "$RUNJOB_LIMIT" || { echo canary broke; exit 2; }; echo full run')
    result = runjob("run", "fragile.yaml", "--canary", "--yes", cwd=project, check=1)
    assert "NO-GO" in result.stdout
    refused = runjob("run", "fragile.yaml", cwd=project, check=1, input="")
    assert "last canary" in refused.stderr and "pass --yes" in refused.stderr
    forced = runjob("run", "fragile.yaml", "--yes", cwd=project, check=1)  # full job completes, but has no results
    assert "warning: the last canary" in forced.stderr
    assert "full run" in runjob("logs", "fragile", cwd=project, check=0).stdout


def test_a_misspelt_backend_type_gets_a_did_you_mean_not_an_install_line(project):
    (project / ".runjob").mkdir(exist_ok=True)
    (project / ".runjob" / "clusters.yaml").write_text("clusters:\n  della:\n    type: slrum\n    host: h\n")
    job_file(project, "typo", "true", cluster="della")
    result = runjob("submit", "typo.yaml", "--yes", cwd=project, check=1)
    assert "no backend named 'slrum'" in result.stderr and "did you mean 'slurm'?" in result.stderr, result.stderr
    assert "pip install" not in result.stderr and "Traceback" not in result.stderr


def test_clusters_check_tests_the_scratch_folder_jobs_really_use(project):
    import json as _json

    checked = runjob("clusters", "check", "local", "--json", cwd=project, check=0)
    [scratch] = [row for row in _json.loads(checked.stdout)["checks"] if row["check"] == "scratch writable"]
    job_file(project, "where", "true")
    runjob("submit", "where.yaml", "--yes", cwd=project, check=0)
    [job_dir] = (project / ".runjob" / "scratch" / "jobs" / "where").iterdir()  # where the job's files went
    assert scratch["ok"] and Path(scratch["detail"]) == job_dir.parents[2], scratch
