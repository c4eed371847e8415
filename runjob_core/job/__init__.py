"""Helpers the job's own code imports: resumable results, progress, checkpoints, signals.

Standard library only, Python 3.9+: runjob uploads this file with every job and puts it
on ``PYTHONPATH``, so ``import runjob_core.job`` works on a compute node where runjob is
not installed. Paths default to the ``RUNJOB_*`` variables the rendered script exports.

    from runjob_core.job import ResultsWriter, progress, limit

    with ResultsWriter("results.jsonl") as out:          # relative to $RUNJOB_RESULTS
        for row in rows[: limit(len(rows))]:
            if row["id"] in out.done:                       # done before a restart
                continue
            out.write({"id": row["id"], "response": answer(row)})
            progress(rows_done=len(out.done))
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Set

__all__ = ["ResultsWriter", "progress", "checkpoint_saved", "latest_checkpoint", "limit", "on_preempt_signal", "results_dir",
           "uploader", "should_stop", "exit_to_resume", "RESUME_EXIT_CODE"]

COMPLETE_MARKER = ".runjob_complete"


def results_dir() -> Path:
    return Path(os.environ.get("RUNJOB_RESULTS", "results"))


def limit(total: int) -> int:
    """How many rows to process: ``RUNJOB_LIMIT`` for a canary run, else *total*."""
    value = os.environ.get("RUNJOB_LIMIT")
    return min(total, int(value)) if value else total


class ResultsWriter:
    """Append-only JSONL results that survive being killed at any point.

    On open it reads the rows already written and exposes their keys in :attr:`done`,
    so a restarted job skips them. A torn last line (the process was killed mid-write)
    is cut off, never parsed or duplicated. Each row is written with one ``write`` call
    and flushed; :meth:`sync` (called on checkpoint and close) also fsyncs.
    """

    def __init__(self, path: "str | os.PathLike[str]", key: str = "id") -> None:
        path = Path(path)
        self.path = path if path.is_absolute() else results_dir() / path
        self.key = key
        self.done: Set[Any] = set()
        self.repaired_bytes = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._handle = open(self.path, "ab")

    def _recover(self) -> None:
        if not self.path.exists():
            return
        good_end = 0
        with open(self.path, "rb") as handle:
            data = handle.read()
        position = 0
        while position < len(data):
            newline = data.find(b"\n", position)
            if newline == -1:
                break  # no newline: the last write was cut
            line = data[position:newline]
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    break  # a torn line followed by garbage: keep what came before
                if isinstance(row, dict) and self.key in row:
                    self.done.add(_hashable(row[self.key]))
            position = newline + 1
            good_end = position
        if good_end < len(data):
            self.repaired_bytes = len(data) - good_end
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)

    def write(self, row: Dict[str, Any]) -> bool:
        """Append *row*; returns False (and writes nothing) if its key is already done."""
        key = _hashable(row[self.key])
        if key in self.done:
            return False
        self._handle.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
        self._handle.flush()
        self.done.add(key)
        return True

    def sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self.sync()
            self._handle.close()

    def __enter__(self) -> "ResultsWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_progress() -> Dict[str, Any]:
    path = Path(os.environ.get("RUNJOB_PROGRESS", "progress.json"))
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def progress(step: Optional[int] = None, rows_done: Optional[int] = None, total: Optional[int] = None, **metrics: Any) -> None:
    """Record the job's progress where the monitor reads it (written atomically).

    Numeric *metrics* (loss, reward, accuracy, tokens_per_s, ...) with the *step* are also
    appended to the metrics history beside the progress file, from which the dashboard
    draws its curves; ``rows_done`` alone is appended at most every few seconds.
    """
    path = Path(os.environ.get("RUNJOB_PROGRESS", "progress.json"))
    current = _read_progress()
    current.update({k: v for k, v in {"step": step, "rows_done": rows_done, "total": total}.items() if v is not None})
    if metrics:
        current.setdefault("metrics", {}).update(metrics)
    now = time.time()
    attempt = int(os.environ.get("RUNJOB_ATTEMPT", "1"))
    finished = rows_done is not None and rows_done == current.get("total")
    size = _append_history(path.parent / HISTORY_FILE, attempt, now, step, rows_done, metrics,
                           last=None if finished or current.get("attempt") != attempt else current.get("rows_history_at"))
    if size is not None:
        current["history_bytes"] = size
        if rows_done is not None:
            current["rows_history_at"] = now
    current["updated_at"] = now
    current["attempt"] = attempt
    _atomic_write(path, json.dumps(current, default=str))


#: The metrics history: JSON lines {"attempt", "t", "step", "rows_done", "m": {name: number}}
#: beside the progress file. The monitor reads only the bytes past ``history_bytes`` it has
#: seen (that count is in the progress file it reads anyway), so an unchanged history costs
#: nothing.
HISTORY_FILE = "metrics.jsonl"
_HISTORY_QUIET_SECONDS = 5.0
_NOT_CURVES = {"last_checkpoint_at", "last_checkpoint_step", "max_save_seconds"}


def _append_history(path: Path, attempt: int, now: float, step: Optional[int], rows_done: Optional[int],
                    metrics: Dict[str, Any], last: Optional[float]) -> Optional[int]:
    """Append one line (one ``write`` to an O_APPEND file: never interleaved); the file size."""
    numbers = {k: v for k, v in metrics.items() if k not in _NOT_CURVES and isinstance(v, (int, float))
               and not isinstance(v, bool) and v == v and abs(v) != float("inf")}
    if not numbers and (rows_done is None or (last is not None and now - last < _HISTORY_QUIET_SECONDS)):
        return None
    line = {"attempt": attempt, "t": round(now, 3), "step": step, "rows_done": rows_done, "m": numbers}
    fd = os.open(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def checkpoint_saved(path: "str | os.PathLike[str]", step: int, *, save_seconds: Optional[float] = None, **info: Any) -> Path:
    """Mark the checkpoint folder *path* complete; call it after every file is written.

    Pass *save_seconds* (how long writing the checkpoint took): runjob uses the longest one
    to ask SLURM for the time-limit warning early enough on the next attempt.
    """
    folder = Path(path)
    files = {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.name != COMPLETE_MARKER}
    marker = folder / COMPLETE_MARKER
    _atomic_write(marker, json.dumps({"step": step, "files": files, "saved_at": time.time(), **info}))
    metrics: Dict[str, Any] = {"last_checkpoint": str(folder), "last_checkpoint_at": time.time(), "last_checkpoint_step": step}
    if save_seconds is not None:
        previous = _read_progress().get("metrics", {}).get("max_save_seconds") or 0
        metrics["max_save_seconds"] = max(float(previous), float(save_seconds))
    progress(step=step, **metrics)
    markers = os.environ.get("RUNJOB_MARKERS")
    if markers and os.path.isdir(markers):
        # Wakes runjob's monitor now (the push path) rather than at its next poll.
        _atomic_write(Path(markers) / "checkpoint", str(step))
    return marker


def latest_checkpoint(root: "str | os.PathLike[str] | None" = None) -> Optional[Path]:
    """The newest checkpoint under *root* whose completion marker matches its files."""
    base = Path(root or os.environ.get("RUNJOB_CHECKPOINT_DIR", "checkpoints"))
    best: Optional[Path] = None
    best_step = -1
    if not base.is_dir():
        return None
    for marker in base.glob(f"*/{COMPLETE_MARKER}"):
        try:
            meta = json.loads(marker.read_text())
        except ValueError:
            continue
        folder = marker.parent
        sizes_ok = all((folder / name).is_file() and (folder / name).stat().st_size == size for name, size in meta.get("files", {}).items())
        if sizes_ok and int(meta.get("step", -1)) > best_step:
            best, best_step = folder, int(meta["step"])
    return best


#: Exit code meaning "stopped early on purpose, resume me": runjob resumes such a job like
#: one that hit its time limit (EX_TEMPFAIL from sysexits.h).
RESUME_EXIT_CODE = 75

_stop_requested = False


def on_preempt_signal(handler: Optional[Callable[[], None]] = None, signum: int = signal.SIGUSR1) -> None:
    """React when the scheduler warns that time is almost up (``--signal=B:USR1@N``).

    With *handler*, it is called from the signal (save a checkpoint, then
    ``sys.exit(RESUME_EXIT_CODE)``). Without, :func:`should_stop` turns true and the job's
    loop saves and exits at its next step, which is safer inside library code.
    """
    def on_signal(_signum: int, _frame: object) -> None:
        global _stop_requested
        _stop_requested = True
        if handler is not None:
            handler()

    signal.signal(signum, on_signal)


def should_stop() -> bool:
    """True once the time-limit warning arrived: save, then :func:`exit_to_resume`.

    The warning comes two ways: the signal (:func:`on_preempt_signal`), and the stop file
    ``RUNJOB_STOP_FILE`` that the job script creates when the signal reaches it. The file is
    what workers under torchrun or accelerate see: they run in sessions of their own, where
    the scheduler's signal never arrives. One ``stat`` per call: cheap enough for every step.
    """
    if _stop_requested:
        return True
    stop_file = os.environ.get("RUNJOB_STOP_FILE")
    return bool(stop_file) and os.path.exists(stop_file)


def exit_to_resume() -> None:
    """Leave with :data:`RESUME_EXIT_CODE` after saving on the warning: "saved, resume me".

    Also records the save beside the stop file (``$RUNJOB_STOP_FILE.saved``), so the job
    script still reports 75 when a launcher turns its workers' exit codes into its own
    (torchrun exits 1 whenever a worker exits non-zero). Call it on every rank.
    """
    stop_file = os.environ.get("RUNJOB_STOP_FILE")
    if stop_file:
        try:
            Path(stop_file + ".saved").touch()
        except OSError as exc:
            # The exit code alone still says it where no launcher stands in between.
            print(f"[runjob] could not record the save beside {stop_file}: {exc}", file=sys.stderr)
    raise SystemExit(RESUME_EXIT_CODE)


def _parse_every(text: str) -> "tuple[Optional[float], Optional[int]]":
    """``upload.every``: '10m', '1h', '90s' -> seconds; '500 rows' or '500' -> rows."""
    text = text.strip().lower()
    if not text:
        return None, None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text[-1] in units and text[:-1].strip().replace(".", "", 1).isdigit():
        return float(text[:-1]) * units[text[-1]], None
    number = text.split()[0]
    return (None, int(number)) if number.isdigit() else (None, None)


def uploader(path: "str | os.PathLike[str]" = "results.jsonl"):
    """An incremental Hub uploader for *path* configured from the job spec's ``upload:``.

    Returns None when the job has no ``upload.repo``. Call ``.maybe_upload()`` after each
    row or batch: it pushes when ``upload.every`` (minutes or rows) has passed and the
    file changed, retries Hub errors with backoff, and never raises (the error is kept in
    ``.last_error``), so a Hub outage does not kill the job. The token comes from HF_TOKEN
    in the job's environment, never from the script. Needs huggingface_hub on the node.
    """
    repo = os.environ.get("RUNJOB_UPLOAD_REPO")
    if not repo:
        return None
    from runjob_core.job.hub import IncrementalUploader

    seconds, rows = _parse_every(os.environ.get("RUNJOB_UPLOAD_EVERY", ""))
    target = Path(path)
    target = target if target.is_absolute() else results_dir() / target
    return IncrementalUploader(target, repo, endpoint=os.environ.get("RUNJOB_UPLOAD_ENDPOINT") or None, token=None,
                               every_seconds=seconds if seconds or rows else 600.0, every_rows=rows,
                               revision=os.environ.get("RUNJOB_UPLOAD_REVISION") or None)
