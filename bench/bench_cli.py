"""runjob's own start-up and local submit, against the raw tools.

1. `runjob --help` against `python -c 'import click'` (target: under 2x).
2. `runjob submit --yes` of a local job against starting the same script with `bash`, and
   against `runjob --help` (target: at most 2x), through the warm process (the default) and
   in a process of its own (``RUNJOB_WARM=0``).

Run: .venv/bin/python bench/bench_cli.py [--reps N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import show, time_interleaved  # noqa: E402

BIN = Path(sys.executable).parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    reps = parser.parse_args().reps

    def run(argv: list[str]) -> Callable[[], object]:
        return lambda: subprocess.run(argv, check=True, capture_output=True)

    click_only, help_ = time_interleaved([run([sys.executable, "-c", "import click"]), run([str(BIN / "runjob"), "--help"])], reps)
    show("1. start-up: `runjob --help` vs importing click", [
        ("python -c 'import click'", click_only),
        ("runjob --help", help_),
    ], target="runjob --help under 2x import click")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "job.yaml").write_text("name: benchjob\ncommand: 'true'\n")
        script = work / "plain.sh"
        script.write_text("#!/bin/bash\ntrue\n")
        env = {**os.environ, "RUNJOB_HOME": str(work / ".runjob")}

        def submit(warm: str) -> Callable[[], object]:
            # --new: each repetition is a fresh job (the same spec would otherwise be reattached).
            return lambda: subprocess.run([str(BIN / "runjob"), "submit", "job.yaml", "--yes", "--new"], cwd=work,
                                          env={**env, "RUNJOB_WARM": warm}, check=True, capture_output=True)

        def plain() -> None:
            subprocess.Popen(["bash", str(script)], start_new_session=True, stdout=subprocess.DEVNULL).wait()

        submit("1")()  # starts the warm process (the first command of a session runs itself)
        plain_samples, help_again, warm, cold = time_interleaved(
            [plain, run([str(BIN / "runjob"), "--help"]), submit("1"), submit("0")], reps)
        show("2. submit a local job: `runjob submit --yes` vs `bash script`", [
            ("bash script.sh (start and wait)", plain_samples),
            ("runjob submit --yes (warm process: the default)", warm),
            ("runjob submit --yes, RUNJOB_WARM=0 (a process of its own)", cold),
        ])
        show("   the same against runjob's start-up", [
            ("runjob --help", help_again),
            ("runjob submit --yes (warm process: the default)", warm),
            ("runjob submit --yes, RUNJOB_WARM=0 (a process of its own)", cold),
        ], target="the default submit at most 2x runjob --help")


if __name__ == "__main__":
    main()
