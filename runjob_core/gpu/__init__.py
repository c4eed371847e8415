"""The GPUs of a machine, as ``nvidia-smi`` reports them, and the telemetry a job samples.

Two readers, both of ``nvidia-smi`` (every NVIDIA machine has it, NVML or not, and a test
can put a stand-in on PATH):

* :func:`read_gpus`: index, UUID, name, memory total/used of each GPU, and the memory the
  processes on it hold (``--query-compute-apps``), so the local backend can tell a GPU
  someone else is using from one runjob's own job is using;
* :func:`parse_telemetry`: the CSV lines the job script writes with
  ``nvidia-smi --query-gpu=TELEMETRY_FIELDS -l N`` (see the base template), for the
  monitor, the report and the idle-GPU finding.

Every call is time-boxed: a hanging ``nvidia-smi`` (a wedged driver) costs at most
``timeout`` seconds and gives one clear line, never a stuck queue.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import attrs

from runjob_core.errors import RunjobError

#: What the job script samples, in this order (``memory.total`` last: the near-full warning
#: needs the card's size on backends runjob cannot query itself).
TELEMETRY_FIELDS = "timestamp,index,utilization.gpu,memory.used,power.draw,temperature.gpu,memory.total"
INVENTORY_FIELDS = "index,uuid,name,memory.total,memory.used"
APPS_FIELDS = "gpu_uuid,pid,used_memory"
#: Seconds an ``nvidia-smi`` query may take before runjob gives up on it.
QUERY_TIMEOUT = 10.0
#: Below this utilisation (percent) a GPU counts as idle.
IDLE_PERCENT = 5.0


class GpuQueryError(RunjobError):
    """``nvidia-smi`` is there but did not answer sensibly (hung, failed, printed garbage)."""


@attrs.frozen
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total_mib: float
    memory_used_mib: float
    #: Memory held on this GPU per process id (``--query-compute-apps``), when nvidia-smi tells.
    processes: tuple[tuple[int, float], ...] = ()

    def describe(self) -> str:
        used = f"{self.memory_used_mib / 1024:.1f}/{self.memory_total_mib / 1024:.0f} GiB used"
        return f"GPU {self.index} {self.name} ({used})"


@attrs.frozen
class Sample:
    """One telemetry line: one GPU at one instant."""

    ts: float
    index: int
    util: float | None
    memory_used_mib: float | None
    power_w: float | None
    temperature_c: float | None
    memory_total_mib: float | None = None


def _query(run: Callable, argv: list[str], timeout: float) -> str | None:
    """stdout of *argv*; None when nvidia-smi is not installed."""
    try:
        done = run(argv, timeout=timeout)
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        raise GpuQueryError(f"nvidia-smi did not answer within {timeout:g} s (a hung driver?); "
                            "check `nvidia-smi` by hand, or restart the machine's NVIDIA driver") from None
    except OSError as exc:
        raise GpuQueryError(f"nvidia-smi could not be started: {exc}") from None
    if not done.ok:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise GpuQueryError(f"nvidia-smi failed (exit code {done.returncode}): {said[0][:200] if said else 'no output'}")
    return done.stdout


def _number(text: str) -> float | None:
    text = text.strip()
    if text in ("", "[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"):
        return None
    return float(text)


def read_gpus(run: Callable, *, timeout: float = QUERY_TIMEOUT) -> list[Gpu] | None:
    """The machine's GPUs, or ``None`` when it has no ``nvidia-smi`` (no NVIDIA GPU).

    :raises GpuQueryError: nvidia-smi hung, failed or printed something that is not its CSV.
    """
    text = _query(run, ["nvidia-smi", f"--query-gpu={INVENTORY_FIELDS}", "--format=csv,noheader,nounits"], timeout)
    if text is None:
        return None
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) != 5:
                raise ValueError(f"{len(fields)} fields")
            gpus.append(Gpu(int(fields[0]), fields[1], fields[2], _number(fields[3]) or 0.0, _number(fields[4]) or 0.0))
        except ValueError:
            raise GpuQueryError(f"nvidia-smi printed a line runjob cannot read as index,uuid,name,memory.total,memory.used: "
                                f"{line.strip()[:120]!r}") from None
    apps = _query(run, ["nvidia-smi", f"--query-compute-apps={APPS_FIELDS}", "--format=csv,noheader,nounits"], timeout)
    held: dict[str, list[tuple[int, float]]] = {}
    for line in (apps or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        # Processes are extra knowledge: a line that does not parse (a driver that hides
        # them prints "[N/A]") leaves the per-GPU totals to decide.
        if len(fields) == 3 and fields[1].isdigit():
            try:
                held.setdefault(fields[0], []).append((int(fields[1]), _number(fields[2]) or 0.0))
            except ValueError:
                continue
    return [attrs.evolve(g, processes=tuple(held.get(g.uuid, ()))) for g in gpus]


def _timestamp(text: str) -> float:
    # nvidia-smi writes the node's local time, "2026/12/04 15:40:46.123"; only differences
    # between samples of one file are used, so the node's time zone does not matter.
    whole, _, fraction = text.strip().partition(".")
    seconds = time.mktime(time.strptime(whole, "%Y/%m/%d %H:%M:%S"))
    return seconds + (float("0." + fraction) if fraction.isdigit() else 0.0)


def parse_telemetry(data: str) -> tuple[list[Sample], int]:
    """Samples in complete telemetry lines, and how many lines were skipped as unreadable
    (a line torn by a kill, a driver message). Never raises on bad input."""
    samples, skipped = [], 0
    for line in data.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        try:
            if len(fields) < 6:
                raise ValueError(line)
            samples.append(Sample(_timestamp(fields[0]), int(fields[1]), _number(fields[2]), _number(fields[3]),
                                  _number(fields[4]), _number(fields[5]), _number(fields[6]) if len(fields) > 6 else None))
        except ValueError:
            skipped += 1
    return samples, skipped
