"""The workstation's GPUs through the real `runjob` command and real processes, with a stand-in
nvidia-smi on PATH (runjob_core.testing.nvidia_smi): refusal, CUDA_VISIBLE_DEVICES per job, the
queue in the store (first come first served, across runjob processes, across restarts), cancel
of a waiting job, GPUs other processes hold, and an nvidia-smi that hangs or prints garbage."""

import json
import shutil
import threading
from pathlib import Path

import pytest
import yaml

from runjob_core.testing import nvidia_smi, run_cli, wait_until

H200 = "NVIDIA H200"


@pytest.fixture
def gpus(runjob_home, monkeypatch):
    """Install the stand-in with the GPUs given; returns a function that reconfigures it."""
    folder = runjob_home.parent / "bin"
    monkeypatch.setenv("PATH", f"{folder}:/usr/local/bin:/usr/bin:/bin")

    def configure(*cards, apps=None, mode="ok"):
        if not (folder / "nvidia-smi").exists():
            return nvidia_smi.install(folder, list(cards), apps=apps, mode=mode)
        return nvidia_smi.configure(folder, list(cards), apps=apps, mode=mode)

    return configure


def job(folder: Path, name: str, command: str, gpus: int = 1, **extra) -> str:
    spec = {"name": name, "command": command, "resources": {"gpus": gpus, **extra.pop("resources", {})}, **extra}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return f"{name}.yaml"


runjob = run_cli


def attempt(cwd, name):
    text = runjob("status", name, "--json", cwd=cwd, check=0).stdout
    text = text[text.find("\n[") + 1:] if not text.startswith("[") else text  # event lines may come first
    return json.loads(text)[0]["attempts"][-1]


# A job that notes its GPUs and when it ran, then waits for a file to exist (the test lets it end).
RECORD = ('echo "$CUDA_VISIBLE_DEVICES $(date +%s.%N)" > seen.{name}; while [ ! -e go.{name} ]; do sleep 0.2; done; '
          'date +%s.%N > end.{name}')


def ran(folder: Path, name: str) -> tuple[float, float]:
    """When the job's own command started and ended (its clock, not the monitor's)."""
    return float((folder / f"seen.{name}").read_text().split()[1]), float((folder / f"end.{name}").read_text())


def test_more_gpus_than_the_machine_has_is_refused_naming_what_it_has(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0))
    result = runjob("submit", job(runjob_home, "two", "true", gpus=2), "--yes", cwd=runjob_home, check=1)
    assert "resources.gpus is 2 but this machine has 1 GPU (0: NVIDIA H200); ask for at most 1" in result.stderr
    assert "Traceback" not in result.stderr and "no jobs" in runjob("status", cwd=runjob_home).stdout + "no jobs"


def test_a_gpu_type_the_machine_lacks_is_refused(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0), nvidia_smi.gpu(1))
    result = runjob("submit", job(runjob_home, "typed", "true", resources={"gpu_type": "a100-80gb"}), "--yes",
                    cwd=runjob_home, check=1)
    assert "resources.gpu_type is 'a100-80gb' but this machine has 0: NVIDIA H200, 1: NVIDIA H200" in result.stderr


def test_no_nvidia_smi_refuses_a_gpu_job_and_runs_a_cpu_job(runjob_home, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a real nvidia-smi")
    result = runjob("submit", job(runjob_home, "g", "true"), "--yes", cwd=runjob_home, check=1)
    assert "this machine has no GPU (nvidia-smi was not found); set resources.gpus: 0" in result.stderr
    runjob("submit", job(runjob_home, "cpu", "echo fine", gpus=0), "--yes", cwd=runjob_home, check=0)
    runjob("watch", "cpu", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "cpu")["state"] == "COMPLETED"


def test_two_one_gpu_jobs_on_one_gpu_wait_their_turn_first_come_first_served(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0))
    for name in ("a", "b", "c"):
        runjob("submit", job(runjob_home, name, RECORD.format(name=name)), "--yes", cwd=runjob_home, check=0)
    wait_until(lambda: (runjob_home / "seen.a").exists(), what="job a to start")
    waiting = attempt(runjob_home, "b")
    assert waiting["state"] == "PENDING" and waiting["reason"] == "waiting for 1 GPU, 0 free"
    assert attempt(runjob_home, "c")["reason"] == "waiting for 1 GPU, 0 free"
    (runjob_home / "go.a").touch()
    # Any runjob process moves the queue: here `runjob status`, polling the waiting jobs.
    wait_until(lambda: attempt(runjob_home, "b")["state"] == "RUNNING", timeout=60, what="b to start after a")
    assert attempt(runjob_home, "c")["state"] == "PENDING" and not (runjob_home / "seen.c").exists()
    (runjob_home / "go.b").touch()
    (runjob_home / "go.c").touch()
    runjob("watch", "a", "b", "c", cwd=runjob_home, check=0)
    seen = {n: (runjob_home / f"seen.{n}").read_text().split() for n in "abc"}
    uuid = nvidia_smi.gpu(0)["uuid"]
    assert {v[0] for v in seen.values()} == {uuid}
    assert ran(runjob_home, "a")[1] <= ran(runjob_home, "b")[0] and ran(runjob_home, "b")[1] <= ran(runjob_home, "c")[0]
    assert attempt(runjob_home, "b")["gpus"] == "0"


def test_on_two_gpus_two_jobs_run_side_by_side_on_different_gpus(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0), nvidia_smi.gpu(1))
    for name in ("a", "b"):
        runjob("submit", job(runjob_home, name, RECORD.format(name=name)), "--yes", cwd=runjob_home, check=0)
    wait_until(lambda: all((runjob_home / f"seen.{n}").exists() for n in "ab"), what="both jobs to start")
    given = {(runjob_home / f"seen.{n}").read_text().split()[0] for n in "ab"}
    assert given == {nvidia_smi.gpu(0)["uuid"], nvidia_smi.gpu(1)["uuid"]}
    assert {attempt(runjob_home, n)["gpus"] for n in "ab"} == {"0", "1"}
    for name in "ab":
        (runjob_home / f"go.{name}").touch()
    runjob("watch", "a", "b", cwd=runjob_home, check=0)


def test_concurrent_runjob_processes_never_give_one_gpu_to_two_jobs(runjob_home, gpus, state, monkeypatch):
    # On both backends (the kit's `state`): the queue's decisions are BEGIN IMMEDIATE transactions,
    # which a PostgreSQL state runs under its write lock (the processes could be on two hosts).
    for key, value in state.env.items():
        monkeypatch.setenv(key, value)
    gpus(nvidia_smi.gpu(0))
    names = ["p", "q", "r", "s"]
    for name in names:
        job(runjob_home, name, RECORD.format(name=name))
    results = {}
    threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, runjob("submit", f"{n}.yaml", "--yes",
                                                                                  cwd=runjob_home)))
               for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.returncode == 0 for r in results.values()), {n: r.stderr for n, r in results.items()}
    for _ in names:  # let them through one at a time; never two running at once
        # `runjob status` polls the waiting jobs, which moves the queue.
        wait_until(lambda: runjob("status", cwd=runjob_home) and sum((runjob_home / f"seen.{n}").exists() for n in names)
                   > sum((runjob_home / f"go.{n}").exists() for n in names), timeout=60, what="the next job to start")
        states = [attempt(runjob_home, n)["state"] for n in names]
        assert states.count("RUNNING") <= 1, states
        started = [n for n in names if (runjob_home / f"seen.{n}").exists() and not (runjob_home / f"go.{n}").exists()]
        assert len(started) == 1, started
        (runjob_home / f"go.{started[0]}").touch()
    runjob("watch", *names, cwd=runjob_home, check=0)
    spans = sorted(ran(runjob_home, n) for n in names)
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))


def test_a_queued_job_survives_runjob_restarting_and_cancel_takes_one_out(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0))
    for name in ("a", "b", "c"):
        runjob("submit", job(runjob_home, name, RECORD.format(name=name)), "--yes", cwd=runjob_home, check=0)
    wait_until(lambda: (runjob_home / "seen.a").exists(), what="a to start")
    runjob("cancel", "b", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "b")["state"] == "CANCELLED"
    (runjob_home / "go.a").touch()
    (runjob_home / "go.c").touch()
    # Every runjob process so far has exited: a new one finds c in the store's queue and starts it.
    runjob("watch", "a", "c", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "c")["state"] == "COMPLETED"
    assert not (runjob_home / "seen.b").exists()


def test_a_gpu_other_processes_hold_is_busy_until_they_let_go(runjob_home, gpus):
    card = nvidia_smi.gpu(0, memory_used=4096)
    gpus(card, apps=[{"gpu_uuid": card["uuid"], "pid": 1, "used_memory": 4096}])
    runjob("submit", job(runjob_home, "a", "echo ran"), "--yes", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "a")["reason"] == "waiting for 1 GPU, 0 free (1 busy with processes runjob did not start)"
    gpus(nvidia_smi.gpu(0, memory_used=512), apps=[{"gpu_uuid": card["uuid"], "pid": 1, "used_memory": 512}])
    runjob("watch", "a", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "a")["state"] == "COMPLETED"


def test_a_gpu_that_disappears_leaves_the_waiting_job_waiting_with_the_reason(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0), nvidia_smi.gpu(1))
    runjob("submit", job(runjob_home, "hold", RECORD.format(name="hold")), "--yes", cwd=runjob_home, check=0)
    runjob("submit", job(runjob_home, "both", "echo ran", gpus=2), "--yes", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "both")["reason"] == "waiting for 2 GPUs, 1 free"
    gpus(nvidia_smi.gpu(0))  # GPU 1 fell off the bus
    waiting = attempt(runjob_home, "both")
    assert waiting["state"] == "PENDING"
    assert waiting["reason"] == "waiting for 2 GPUs, this machine now shows 1 (0: NVIDIA H200)"
    runjob("cancel", "both", cwd=runjob_home, check=0)
    (runjob_home / "go.hold").touch()
    runjob("watch", "hold", cwd=runjob_home, check=0)


@pytest.mark.parametrize("mode, said", [
    ("garbage", "nvidia-smi printed a line runjob cannot read as index,uuid,name,memory.total,memory.used"),
    ("fail", "nvidia-smi failed (exit code 9): NVIDIA-SMI has failed"),
    ("hang", "nvidia-smi did not answer within 10 s"),
])
def test_a_broken_nvidia_smi_gives_one_clear_line_and_never_a_stuck_queue(runjob_home, gpus, mode, said):
    gpus(nvidia_smi.gpu(0), mode=mode)
    result = runjob("submit", job(runjob_home, "a", "true"), "--yes", cwd=runjob_home, check=1)
    assert said in result.stderr and "Traceback" not in result.stderr
    check = runjob("clusters", "check", "local", cwd=runjob_home)
    assert said in check.stdout.replace("\n", " ") or said[:40] in check.stdout
    if mode != "garbage":
        return
    # A queue that was waiting when nvidia-smi broke keeps waiting, with the reason.
    gpus(nvidia_smi.gpu(0))
    runjob("submit", job(runjob_home, "hold", RECORD.format(name="hold")), "--yes", cwd=runjob_home, check=0)
    runjob("submit", job(runjob_home, "next", "echo ran"), "--yes", cwd=runjob_home, check=0)
    gpus(nvidia_smi.gpu(0), mode=mode)
    (runjob_home / "go.hold").touch()
    wait_until(lambda: attempt(runjob_home, "hold")["state"] == "COMPLETED", what="hold to end")
    waiting = attempt(runjob_home, "next")
    assert waiting["state"] == "PENDING" and waiting["reason"].startswith("waiting: cannot see this machine's GPUs")
    gpus(nvidia_smi.gpu(0))
    runjob("watch", "next", cwd=runjob_home, check=0)
    assert attempt(runjob_home, "next")["state"] == "COMPLETED"


def test_clusters_check_lists_the_gpus(runjob_home, gpus):
    gpus(nvidia_smi.gpu(0), nvidia_smi.gpu(1, memory_used=30000))
    out = runjob("clusters", "check", "local", "--json", cwd=runjob_home, check=0).stdout
    rows = {r["check"]: r for r in json.JSONDecoder().raw_decode(out[out.find("["):])[0]}
    assert rows["gpus"]["detail"] == "2 GPUs"
    assert rows["gpu 1"]["detail"].startswith("GPU 1 NVIDIA H200 (29.3/140 GiB used), GPU-00000001")
