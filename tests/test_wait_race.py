"""The job templates' wait loops report the job's own exit status even when the USR1 trap's
interrupted wait (128+10) races the job's exit (seen on CI: a saved job reported exit 10)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[1] / "runjob_core" / "templates"


def _loop(template: str, child: str, rc: str) -> str:
    text = (TEMPLATES / template).read_text()
    match = re.search(rf'while true; do\n\s*wait "\${child}"\n\s*{rc}=\$\?\n(?:\s*#.*\n)?\s*kill -0 "\${child}" 2>/dev/null \|\| break\n\s*done\n(?:\s*#.*\n\s*wait "\${child}".*\n)?', text)
    assert match, f"the wait loop of {template} changed shape"
    return match.group(0)


def test_an_interrupted_wait_racing_the_exit_keeps_the_jobs_status():
    for template, child, rc in [("training.sbatch.j2", "runjob_child", "runjob_child_rc"),
                                ("_multinode.sh.j2", "runjob_child", "runjob_child_rc"),
                                ("_multinode.sh.j2", "child", "rc")]:
        # A child that saves and exits 75 on USR1, and a pause between the interrupted wait and
        # the liveness check: the race, made certain.
        loop = _loop(template, child, rc).replace("|| break", "|| break", 1).replace(
            f'{rc}=$?\n', f'{rc}=$?\n  sleep 0.3\n', 1)
        script = (f'( trap "exit 75" USR1; while :; do sleep 0.01; done ) &\n{child}=$!\n'
                  f'trap \'kill -USR1 "${child}"\' USR1\n(sleep 0.3; kill -USR1 $$) &\n{loop}echo "rc=${rc}"\n')
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30).stdout
        assert out.strip() == "rc=75", (template, child, out)
