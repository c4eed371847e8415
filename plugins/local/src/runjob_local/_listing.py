"""The local jobs runjob started, found from the runners' own files (adoption, issue 34).

Each attempt's runner leaves ``pod-pid.<n>`` in its job folder
(``<scratch>/jobs/<name>/<runjob id>/``) and ``exit.<n>`` when it ends: a pid file without an
exit file whose process is alive is a live job, and the folder names its tag. A reused pid
is not taken for a runner: its process must have started before the pid file was written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from runjob_core.models import RUNNING, TaggedJob
from runjob_core.transport import detached

SOURCE = "runjob-local"
_PID_FILE = re.compile(r"pod-pid\.([1-9][0-9]*)")


def list_tagged(cluster, context) -> list[TaggedJob]:
    from runjob_core.staging import scratch_root

    scratch = Path(scratch_root(cluster, context.transport(cluster), context.state_dir))
    jobs = []
    for pid_file in sorted(scratch.glob("jobs/*/rj-*/pod-pid.*")):
        match = _PID_FILE.fullmatch(pid_file.name)
        if match is None or (pid_file.parent / f"exit.{match.group(1)}").exists():
            continue
        pid = pid_file.read_text().strip()
        if not pid.isdigit() or not _runner_alive(int(pid), pid_file):
            continue
        jobs.append(TaggedJob(tag=f"runjob:{pid_file.parent.name}:{match.group(1)}", backend_job_id=f"local-{pid}",
                              state=RUNNING, source=SOURCE, job_dir=str(pid_file.parent)))
    return jobs


def _runner_alive(pid: int, pid_file: Path) -> bool:
    ticks = detached.process_start_time(pid)
    if ticks is None:
        return False
    # The runner wrote its pid once it ran: a process started after the file is another one.
    with open("/proc/stat") as handle:
        boot = next(float(line.split()[1]) for line in handle if line.startswith("btime "))
    started = boot + int(ticks) / os.sysconf("SC_CLK_TCK")
    return started <= pid_file.stat().st_mtime + 1
