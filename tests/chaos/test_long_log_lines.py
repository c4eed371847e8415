"""Log lines longer than the monitor's read window (issue 34 item 4), through the real
`runjob` command and a real local job: a progress bar redrawn with '\\r' for ~11 MB, and a
single 9 MB line with no line end at all. A CUDA OOM printed after either is still seen, and
the job is stopped by the health check instead of running on to "completed"."""

import json

import pytest
import yaml

from runjob_core.monitor import observe
from runjob_core.testing import run_cli

pytestmark = [pytest.mark.chaos, pytest.mark.slow]
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
# Waits (up to 10 minutes) to be stopped: "completed" would mean the OOM went unseen.
TAIL = f"print({OOM!r}, flush=True); import time; time.sleep(600)"
BAR = "import sys; [sys.stdout.write(f'\\r{i:>9} it [00:01, 123.45it/s]' + ' ' * 70) for i in range(110_000)]; print(flush=True); " + TAIL
ONE_LINE = "import sys; sys.stdout.write('x' * (9 << 20)); print(flush=True); " + TAIL


@pytest.mark.parametrize("program", [BAR, ONE_LINE], ids=["cr-progress-bar-11MB", "single-line-9MB"])
def test_an_oom_after_a_line_longer_than_the_window_is_seen(runjob_home, program):
    (runjob_home / "prog.py").write_text(program)
    (runjob_home / "long.yaml").write_text(yaml.safe_dump({"name": "long", "command": "python3 prog.py",
                                                           "resume": {"auto": False}}))
    result = run_cli("run", "long.yaml", "--yes", cwd=runjob_home, timeout=300)
    assert result.returncode != 0
    report = json.loads(run_cli("report", "long", "--json", cwd=runjob_home).stdout)
    assert report["job"]["state"] != "COMPLETED", report["job"]
    assert any("oom" in a["label"].lower() for a in report["anomalies"]), report["anomalies"]
    assert observe.MAX_WINDOW_BYTES < 9 << 20  # the lines above are longer than one window
