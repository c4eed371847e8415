"""The job templates' wait for the command reports the command's own exit status even when the
USR1 trap's interrupted wait (128+10) races the command's exit (seen on CI: a saved job reported
exit 10), and even when bash's wait loses the child altogether (seen on CI: a rank that exited
75 reported 127; scripts/wait-race.sh makes bash 5.2 answer -1 about once in 800 tries)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jinja2
import pytest

TEMPLATES = Path(__file__).resolve().parents[1] / "runjob_core" / "templates"


def _macros():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True)
    return env.get_template("_command.sh.j2").module


def _script(tmp_path: Path, command: str, *, before_liveness: str = "", lost_wait: bool = False) -> str:
    macros = _macros()
    wait_for = macros.wait_function()
    # The race, made certain: a pause between the interrupted wait and the liveness check.
    wait_for = wait_for.replace("    rc=$?\n", f"    rc=$?\n{before_liveness}", 1)
    assert before_liveness == "" or before_liveness in wait_for, "runjob_wait_for changed shape"
    # bash losing the child, as on CI: every wait for it answers "not a child" (127).
    lost = 'wait() { command wait "$@" 2>/dev/null; return 127; }\n' if lost_wait else ""
    return (f'export RUNJOB_COMMAND_RC={tmp_path}/command.rc\nrunjob_command={tmp_path}/command.sh\n'
            f'{macros.write_command("runjob_command", {"command": command})}\n{wait_for}\n{lost}'
            f'bash "$runjob_command" &\nchild=$!\n'
            f'trap \'kill -USR1 "$child"; pkill -USR1 -P "$child"\' USR1\n'
            # The warning once the command can take it (its handler is set: a slow start under load).
            f'(while [ ! -e {tmp_path}/ready ] && kill -0 $$; do sleep 0.02; done; kill -USR1 $$) >/dev/null 2>&1 &\n'
            f'runjob_wait_for "$child"\necho "rc=$runjob_waited_rc"\n')


SAVES_ON_USR1 = ("python3 -c 'import pathlib, signal, sys, time; signal.signal(signal.SIGUSR1, lambda *a: sys.exit(75)); "
                 "pathlib.Path(sys.argv[1]).touch(); time.sleep(60)' \"$(dirname \"$RUNJOB_COMMAND_RC\")/ready\"")


@pytest.mark.parametrize("case", ["plain", "interrupted wait races the exit", "bash loses the child"])
def test_the_wait_reports_the_commands_own_exit(tmp_path, case):
    script = _script(tmp_path, SAVES_ON_USR1, before_liveness="    sleep 0.3\n" if case != "plain" else "",
                     lost_wait=case == "bash loses the child")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "rc=75", (case, out.stdout, out.stderr)


def test_a_command_that_replaces_the_exit_trap_falls_back_to_waits_status(tmp_path):
    script = _script(tmp_path, "trap 'echo bye' EXIT\nexit 3")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip().splitlines()[-1] == "rc=3", out
    assert not (tmp_path / "command.rc").exists()


def test_every_command_path_waits_through_the_shared_function():
    """Training, each node of a multi-node job, its batch shell, and the vLLM client."""
    for template, uses in [("training.sbatch.j2", 1), ("_multinode.sh.j2", 2), ("_vllm_serve.sh.j2", 1)]:
        text = (TEMPLATES / template).read_text()
        assert text.count("runjob_wait_for \"$") == uses, template
        assert "while true; do\n  wait" not in text, template
