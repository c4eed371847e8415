"""Backends broken on purpose, one bug each, for the kit's own tests: each must fail it.

:data:`SPOOL` is a correct third-party backend of the simplest kind (jobs detached on this
machine under :mod:`runjob_core.transport.detached`, as a plugin author would write one from
the guide). Each other object breaks one thing the plugin authors broke while writing theirs
(``research/plugin-author-review.md``), and names the kit rule that must catch it:

=============  ================================================  =======================
plugin         the bug                                           kit rule that fails
=============  ================================================  =======================
nocancel       ``runjob_cancel`` does nothing, returns the ids   cancel-stops-the-job
nokill         cancel writes its marker but kills nothing; poll  cancel-stops-the-job
               trusts the marker (says CANCELLED)
forgetful      collect skips the subfolders of the results       collect-is-complete
noquote        its own shell line leaves paths unquoted          paths-with-spaces
moduleglobal   job data in a module global, not ``extra``        separate-processes
blocking       submit waits for the job to end                   submit-returns
racy           reads the exit file before liveness (with a       no-false-endings
               pause between, as a loaded machine has)
=============  ================================================  =======================

They are installed for the kit's tests by ``tests/data/broken-backends-dist`` (entry points
on ``PYTHONPATH``), so the CLI processes the kit starts load them as a user's would.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

from runjob_core import hookimpl
from runjob_core.models import BackendInfo, JobStatus
from runjob_core.transport import detached


class Spool:
    """A correct backend: what the guide's walk-through builds."""

    name = "spool"

    @hookimpl
    def runjob_backend_info(self):
        return BackendInfo(name=self.name, source=self.name, poll_interval=0.2, max_poll_interval=1.0)

    @hookimpl
    def runjob_submit(self, job, attempt, rendered, cluster, context):
        files = detached.RunnerFiles(attempt.layout.job_dir, attempt.n)
        Path(attempt.layout.log_path).parent.mkdir(parents=True, exist_ok=True)
        started = self._start(context, files, attempt, rendered)
        extra = {"pid": str(started), "start_time": detached.process_start_time(started) or ""}
        return attempt.submission(backend=self.name, cluster=cluster.name, backend_job_id=f"{self.name}-{started}",
                                  source=self.name, extra=self._keep(attempt.tag, extra))

    def _start(self, context, files, attempt, rendered) -> int:
        script = f"{attempt.layout.job_dir}/{rendered.script_name}"
        argv = detached.wrapper_argv(files, ["bash", script], None)
        return context.run(argv, cwd=attempt.layout.workdir, detach=True, output_path=attempt.layout.log_path).pid

    def _keep(self, tag: str, extra: dict) -> dict:
        return extra

    def _extra(self, submission) -> dict:
        return submission.extra

    @hookimpl
    def runjob_poll(self, submissions):
        return {s.backend_job_id: self._status(s) for s in submissions}

    def _status(self, submission) -> JobStatus:
        extra = self._extra(submission)
        files = detached.RunnerFiles(submission.job_dir, submission.attempt)
        state = detached.read_local(files, int(extra["pid"]), extra["start_time"] or None)
        return detached.decide(state, source=self.name)

    @hookimpl
    def runjob_cancel(self, submissions):
        for submission in submissions:
            files = detached.RunnerFiles(submission.job_dir, submission.attempt)
            if not Path(files.exit).exists():
                Path(files.cancelled).touch()
            self._kill(int(self._extra(submission)["pid"]))
        return [s.backend_job_id for s in submissions]

    def _kill(self, pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            return

    @hookimpl(tryfirst=True)
    def runjob_collect(self, submission, dest):
        from runjob_core import collecting
        from runjob_core.models import Artifact

        source = Path(submission.results_dir)
        if not source.is_dir():
            return []
        files, copied, rows, problems = collecting.copy_tree(self._results(source), dest, self.name)
        return [Artifact(name="results", kind="results", location=str(dest), source=self.name, rows=rows,
                         data={"files": files, "copied": copied}), *problems] if files else problems

    def _results(self, source: Path) -> Path:
        return source


class NoCancel(Spool):
    name = "nocancel"

    @hookimpl
    def runjob_cancel(self, submissions):
        return [s.backend_job_id for s in submissions]


class NoKill(Spool):
    name = "nokill"

    def _kill(self, pid: int) -> None:
        return  # the marker is written; the process runs on

    def _status(self, submission) -> JobStatus:
        if Path(detached.RunnerFiles(submission.job_dir, submission.attempt).cancelled).exists():
            return JobStatus(state="CANCELLED", source=self.name, reason="cancelled")
        return super()._status(submission)


class Forgetful(Spool):
    name = "forgetful"

    def _results(self, source: Path) -> Path:
        # Copies the top level only, into a private folder: subfolders are forgotten.
        flat = source.parent / (source.name + ".flat")
        flat.mkdir(exist_ok=True)
        for item in source.iterdir():
            if item.is_file():
                (flat / item.name).write_bytes(item.read_bytes())
        return flat


class NoQuote(Spool):
    name = "noquote"

    def _start(self, context, files, attempt, rendered) -> int:
        script = f"{attempt.layout.job_dir}/{rendered.script_name}"
        wrapper = shlex.join(detached.wrapper_argv(files, ["bash", script], None))
        # The bug: paths pasted into a shell line unquoted (fine until a path has a space).
        line = f"cd {attempt.layout.workdir} && exec {wrapper}"
        return context.run(["bash", "-c", line], detach=True, output_path=attempt.layout.log_path).pid


_JOBS: dict[str, dict] = {}


class ModuleGlobal(Spool):
    name = "moduleglobal"

    def _keep(self, tag: str, extra: dict) -> dict:
        _JOBS[tag] = extra  # the bug: lives as long as this process
        return {}

    def _extra(self, submission) -> dict:
        return _JOBS[submission.tag]


class Blocking(Spool):
    name = "blocking"

    def _start(self, context, files, attempt, rendered) -> int:
        pid = super()._start(context, files, attempt, rendered)
        while detached.process_start_time(pid) is not None:  # the bug: waits for the job
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
        return pid


class Racy(Spool):
    name = "racy"

    def _status(self, submission) -> JobStatus:
        extra = submission.extra
        files = detached.RunnerFiles(submission.job_dir, submission.attempt)
        exit_file = Path(files.exit)
        code = exit_file.read_text().strip() if exit_file.exists() else None  # the bug: exit file first...
        time.sleep(0.3)  # ...then, on a busy machine, a while later...
        alive = detached.process_start_time(int(extra["pid"])) == extra["start_time"]  # ...liveness
        state = detached.RunnerState(exit_code=int(code) if code else None, cancelled=False, started=True, alive=alive)
        return detached.decide(state, source=self.name)


SPOOL, NOCANCEL, NOKILL, FORGETFUL = Spool(), NoCancel(), NoKill(), Forgetful()
NOQUOTE, MODULEGLOBAL, BLOCKING, RACY = NoQuote(), ModuleGlobal(), Blocking(), Racy()
#: backend name -> the kit rule its bug must break.
BROKEN = {"nocancel": "cancel-stops-the-job", "nokill": "cancel-stops-the-job", "forgetful": "collect-is-complete",
          "noquote": "paths-with-spaces", "moduleglobal": "separate-processes", "blocking": "submit-returns",
          "racy": "no-false-endings"}

