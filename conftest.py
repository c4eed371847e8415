import os

import pytest

pytest_plugins = ["runjob_core.testing", "runjob_slurm.testing"]

# The suite's `runjob` commands run in their own processes, as they did before the warm path
# (runjob_core.warm): one warm process per test's private folders would pile up on a shared
# machine. tests/test_warm.py turns it on for itself.
os.environ.setdefault("RUNJOB_WARM", "0")


@pytest.fixture(autouse=True)
def _environment_given_back():
    """Every test gets the environment back as it found it. Helpers shared with the benches
    (bench/_recorded_queue.py) set RUNJOB_HOME and RUNJOB_CLUSTERS in os.environ, right for a
    bench's own process; leaked, every later test of that xdist worker read their clusters.yaml
    ("unknown cluster 'under-test'", CI of stop 40)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _signals_given_back():
    """A test that leaves SIGINT ignored or blocked in its worker fails here, by name, and the
    worker gets it back: every later child process of that worker would inherit it (an ignored
    or blocked SIGINT survives exec), and `runjob dashboard --serve` would never see its Ctrl-C.
    Read from the kernel (/proc/self/status), not only from Python: C code (``system()``, a
    library's sigaction) changes the disposition without Python's signal module knowing. Full
    runs saw a dashboard child start with SIGINT and SIGQUIT ignored, system()'s signature."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []), _kernel_masks())
    yield
    after = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []), _kernel_masks())
    if after != before:
        signal.signal(signal.SIGINT, before[0])  # also resets the kernel's disposition of SIGINT
        signal.pthread_sigmask(signal.SIG_SETMASK, before[1])
        pytest.fail(f"this test left the worker's SIGINT handling changed: (Python handler, blocked, kernel "
                    f"SigIgn/SigBlk) {before!r} -> {after!r} (SIGINT given back now)")


def _kernel_masks() -> tuple[str, ...]:
    """This thread's ignored and blocked signal sets as the kernel holds them."""
    with open("/proc/thread-self/status") as status:
        return tuple(line.split()[1] for line in status if line.startswith(("SigIgn", "SigBlk")))


def pytest_terminal_summary(terminalreporter):
    """The chaos suite's figures (tests/chaos), printed once by the controller process."""
    import json
    import os
    from pathlib import Path

    path = Path("/tmp") / f"runjob-chaos-tally-{os.getuid()}-{os.getpid()}.jsonl"
    if not path.exists():
        return
    fields = ("trials", "failures", "duplicate_submissions", "duplicated_rows", "lost_rows", "tracebacks")
    tally: dict = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        row = tally.setdefault(entry.pop("scenario"), dict.fromkeys(fields, 0))
        for key, value in entry.items():
            row[key] += value
    path.unlink()
    write = terminalreporter.write_line
    terminalreporter.section("chaos suite")
    write(f"{'scenario':<36}" + "".join(f"{f.replace('_', ' '):>22}" for f in fields))
    total = {f: sum(row[f] for row in tally.values()) for f in fields}
    for scenario, row in [*sorted(tally.items()), ("total", total)]:
        write(f"{scenario:<36}" + "".join(f"{row[f]:>22}" for f in fields))
    if os.environ.get("RUNJOB_CHAOS_REPORT"):
        Path(os.environ["RUNJOB_CHAOS_REPORT"]).write_text(json.dumps({"scenarios": tally, "total": total}, indent=2))
