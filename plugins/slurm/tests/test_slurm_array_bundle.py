"""A sweep array's bundle (runjob_slurm._array): each task unpacks exactly its own element's
files, and runjob's job-side library, into its own folder and runs its script there.

The array's script is run here by bash as SLURM would run task i (``SLURM_ARRAY_TASK_ID``):
its ``#SBATCH`` lines are comments to bash, the unpacking is GNU tar's. The cluster tier
(``test_slurm_sweep_array.py``) runs the same script under sbatch.
"""

import json
import os
import subprocess

from runjob_core.models import Attempt, Layout, Rendered, ScriptModel
from runjob_slurm import _array


def attempts_in(scratch, names):
    made = []
    for name in names:
        job_dir = f"{scratch}/jobs/{name}/rj-{name}"
        layout = Layout(scratch=str(scratch), job_dir=job_dir, workdir=job_dir, sync_from=None,
                        results_dir=f"{job_dir}/results", checkpoint_dir=f"{job_dir}/checkpoints",
                        progress_path=f"{job_dir}/progress.json", params_path=f"{job_dir}/params.json",
                        log_path=f"{scratch}/logs/{name}.out", lib_dir=f"{job_dir}/lib", cache_dir=f"{scratch}/cache",
                        script_path=f"{job_dir}/run.1.sh")
        made.append(Attempt(job_id=f"rj-{name}", n=1, tag=f"runjob:rj-{name}:1", layout=layout))
    return made


def element_script(name):
    # Says where it ran and what it found beside it (UTF-8 beyond ASCII: the ranges are bytes).
    return f'#!/bin/bash\necho "élément {name} in $PWD"\ncat params.json\nls -R . | sort\n'


def write_array(scratch, names, common):
    attempts = attempts_in(scratch, names)
    rendereds = [Rendered(script=element_script(n), template="t", source="s", script_name="run.1.sh") for n in names]
    folders = [{"run.1.sh": (element_script(n), 0o755), "params.json": (json.dumps({"who": n, "ü": "ß"}) + "\n", 0o644),
                "runjob.json": ("{}\n", 0o600)} for n in names]
    data, library, ranges = _array.bundle_of(folders, common)
    folder = _array.array_dir(attempts[0])
    os.makedirs(folder)
    os.makedirs(f"{scratch}/logs")
    with open(f"{folder}/bundle.tar", "wb") as out:
        out.write(data)
    with open(f"{folder}/index", "w") as out:
        out.write(_array.index_lines(attempts, rendereds, ranges))
    with open(f"{folder}/array.sh", "w") as out:
        out.write(_array.render(len(names), attempts[0], "grid", ["#SBATCH --nodes=1"], "runjob-array:x", 1, library))
    return attempts, f"{folder}/array.sh"


def run_task(script, task):
    return subprocess.run(["bash", script], env={**os.environ, "SLURM_ARRAY_TASK_ID": str(task)}, capture_output=True,
                          text=True)


def test_each_task_unpacks_only_its_own_element_and_runs_it_there(tmp_path):
    common = {"lib/runjob_core/__init__.py": ('"""lib"""\n', 0o644), "lib/runjob_core/job/x.py": ("X = 1\n", 0o644)}
    names = ["a-lr-0.1", "a-lr-0.3", "a-lr-1"]
    attempts, script = write_array(tmp_path, names, common)
    for attempt in attempts:
        assert not os.path.exists(attempt.layout.job_dir)  # nothing of an element before its task starts

    done = run_task(script, 1)
    assert done.returncode == 0, done.stderr
    ran = attempts[1].layout
    log = open(ran.log_path, encoding="utf-8").read()
    assert f"élément a-lr-0.3 in {ran.job_dir}" in log
    assert json.loads(open(ran.params_path).read()) == {"who": "a-lr-0.3", "ü": "ß"}
    assert open(f"{ran.job_dir}/lib/runjob_core/job/x.py").read() == "X = 1\n"
    assert os.access(ran.script_path, os.X_OK)
    assert oct(os.stat(f"{ran.job_dir}/runjob.json").st_mode & 0o777) == "0o600"
    assert sorted(os.listdir(ran.job_dir)) == ["lib", "params.json", "run.1.sh", "runjob.json"]
    assert not os.path.exists(attempts[0].layout.job_dir) and not os.path.exists(attempts[2].layout.job_dir)

    assert run_task(script, 2).returncode == 0
    assert "élément a-lr-1 in" in open(attempts[2].layout.log_path, encoding="utf-8").read()


def test_a_task_makes_its_script_from_the_array_s_model_and_runs_it(tmp_path):
    # The elements' scripts made from one text (runjob_core.sweep._scripts): the bundle holds
    # none, each task makes its own by the same replacement and runs it.
    names = ["m-lr-0.1", "m-lr-0.3", "m-lr-1"]
    attempts = attempts_in(tmp_path, names)
    model = ScriptModel(text="#!/bin/bash\n# job rjnameab12 (rj-idcd34), log {scratch}/logs/rjnameab12.out\n"
                             "echo \"élément rjnameab12 rj-idcd34 in $PWD\"\ncat params.json\n".replace("{scratch}", str(tmp_path)),
                        name_in="rjnameab12", id_in="rj-idcd34")
    rendereds = [Rendered(script=model.script_for(n, a.job_id), template="t", source="s", script_name="run.1.sh")
                 for n, a in zip(names, attempts)]
    folders = [{"params.json": (json.dumps({"who": n}) + "\n", 0o644), "runjob.json": ("{}\n", 0o600)} for n in names]

    from runjob_core.models import ClusterConfig
    from runjob_core.transport import LocalTransport
    from runjob_core.transport.execute import Completed

    class RecordedSbatch(LocalTransport):
        def run(self, argv, **kwargs):
            if argv[0] == "sbatch":
                return Completed(argv=list(argv), returncode=0, stdout="77\n", stderr="")
            return super().run(argv, **kwargs)

    class Named:  # the jobs: only their names are read
        def __init__(self, name):
            self.name = name

    cluster = ClusterConfig(name="c", type="slurm", scratch_path=str(tmp_path))
    made = _array.submit([Named(n) for n in names], attempts, rendereds, "grid", cluster, RecordedSbatch(), 3,
                         folders=folders, common_files={"lib/x.py": ("X = 1\n", 0o644)}, script_model=model)
    assert [s.backend_job_id for s in made] == ["77_0", "77_1", "77_2"]
    folder = _array.array_dir(attempts[0])
    assert open(f"{folder}/model.sh").read() == model.text
    done = run_task(f"{folder}/array.sh", 1)
    assert done.returncode == 0, done.stderr
    ran = attempts[1].layout
    assert open(ran.script_path).read() == rendereds[1].script  # byte for byte the element's own
    assert os.access(ran.script_path, os.X_OK)
    log = open(ran.log_path, encoding="utf-8").read()
    assert f"élément m-lr-0.3 rj-m-lr-0.3 in {ran.job_dir}" in log and '"who": "m-lr-0.3"' in log
    assert sorted(os.listdir(ran.job_dir)) == ["lib", "params.json", "run.1.sh", "runjob.json"]


def test_a_task_whose_bundle_is_gone_says_so_in_its_log_and_exits_97(tmp_path):
    attempts, script = write_array(tmp_path, ["b-0", "b-1"], {})
    os.remove(f"{_array.array_dir(attempts[0])}/bundle.tar")
    failed = run_task(script, 0)
    assert failed.returncode == _array.CANNOT_UNPACK
    assert "cannot unpack this element's files" in open(attempts[0].layout.log_path).read()


def test_a_task_outside_the_array_runs_nothing(tmp_path):
    _attempts, script = write_array(tmp_path, ["c-0", "c-1"], {})
    failed = run_task(script, 7)
    assert failed.returncode == 2 and "runs no element" in failed.stderr
    assert "not an array task" in subprocess.run(["bash", script], capture_output=True, text=True,
                                                 env={k: v for k, v in os.environ.items() if k != "SLURM_ARRAY_TASK_ID"}).stderr


def test_the_array_script_is_the_same_size_for_2_elements_or_2000(tmp_path):
    first = attempts_in(tmp_path, ["d-0"])[0]
    small, large = (_array.render(n, first, "grid", ["#SBATCH --nodes=1"], "runjob-array:x", 4, 10240) for n in (2, 2000))
    differ = [(a, b) for a, b in zip(small.splitlines(), large.splitlines()) if a != b]
    assert differ == [("#SBATCH --array=0-1", "#SBATCH --array=0-1999%4")]  # nothing per element in the script


def test_a_folder_written_at_submit_is_run_as_it_is(tmp_path):
    # No bundle (a path no tar header holds): the index says "-" and the task unpacks nothing.
    attempts = attempts_in(tmp_path, ["e-0", "e-1"])
    rendereds = [Rendered(script=element_script(a.job_id), template="t", source="s", script_name="run.1.sh") for a in attempts]
    for attempt, rendered in zip(attempts, rendereds):
        os.makedirs(attempt.layout.job_dir)
        with open(attempt.layout.script_path, "w") as out:
            out.write(rendered.script)
        with open(attempt.layout.params_path, "w") as out:
            out.write("{}\n")
    folder = _array.array_dir(attempts[0])
    os.makedirs(folder)
    os.makedirs(f"{tmp_path}/logs")
    with open(f"{folder}/index", "w") as out:
        out.write(_array.index_lines(attempts, rendereds, None))
    with open(f"{folder}/array.sh", "w") as out:
        out.write(_array.render(2, attempts[0], "grid", [], "runjob-array:x", 1, 0))
    assert run_task(f"{folder}/array.sh", 1).returncode == 0
    assert f"in {attempts[1].layout.job_dir}" in open(attempts[1].layout.log_path, encoding="utf-8").read()


def test_submit_writes_the_folders_at_submit_when_a_path_fits_no_tar_header(tmp_path):
    # _array.submit itself, on this machine's files (LocalTransport); only sbatch's answer is
    # recorded (the array is not queued here: the cluster tier queues real ones).
    from runjob_core.models import ClusterConfig
    from runjob_core.transport import LocalTransport
    from runjob_core.transport.execute import Completed

    class RecordedSbatch(LocalTransport):
        def run(self, argv, **kwargs):
            if argv[0] == "sbatch":
                self.sbatch = argv
                return Completed(argv=list(argv), returncode=0, stdout="4242\n", stderr="")
            return super().run(argv, **kwargs)

    attempts = attempts_in(tmp_path, ["e-0", "e-1"])
    rendereds = [Rendered(script=element_script(a.job_id), template="t", source="s", script_name="run.1.sh") for a in attempts]
    long_name = "n" * 120  # a file a template made: no ustar header holds its name
    folders = [{"run.1.sh": (r.script, 0o755), "params.json": ('{"i": %d}\n' % i, 0o644), long_name: ("x\n", 0o644)}
               for i, r in enumerate(rendereds)]
    common = {"lib/runjob_core/__init__.py": ('"""lib"""\n', 0o644)}
    transport = RecordedSbatch()
    cluster = ClusterConfig(name="c", type="slurm", scratch_path=str(tmp_path))
    made = _array.submit([None, None], attempts, rendereds, "grid", cluster, transport, 2, folders=folders,
                         common_files=common)
    assert [s.backend_job_id for s in made] == ["4242_0", "4242_1"]
    folder = _array.array_dir(attempts[0])
    assert transport.sbatch[-1] == f"{folder}/array.sh" and not os.path.exists(f"{folder}/bundle.tar")
    assert [line.split()[1:3] for line in open(f"{folder}/index").read().splitlines()] == [["-", "-"], ["-", "-"]]
    for i, attempt in enumerate(attempts):  # each folder written whole at submit, the library too
        job_dir = attempt.layout.job_dir
        assert sorted(os.listdir(job_dir)) == sorted(["lib", "params.json", "run.1.sh", long_name])
        assert open(f"{job_dir}/lib/runjob_core/__init__.py").read() == '"""lib"""\n'
        assert os.access(attempt.layout.script_path, os.X_OK)
    assert run_task(f"{folder}/array.sh", 1).returncode == 0  # and task 1 runs its folder as it is
    log = open(attempts[1].layout.log_path, encoding="utf-8").read()
    assert f"in {attempts[1].layout.job_dir}" in log and '{"i": 1}' in log


def test_a_path_no_tar_header_holds_makes_no_bundle():
    assert _array.bundle_of([{"x" * 120: ("y", 0o644)}], {}) is None
    data, library, ranges = _array.bundle_of([{"a": ("1", 0o644)}, {"b": ("22", 0o644)}], {"lib/c": ("3", 0o644)})
    assert library == 1024 and ranges == [(1024, 1024), (2048, 1024)] and len(data) == 3072


# ---- finding an element's task after a runjob killed between sbatch and recording ----------


class Files:
    """The cluster's files as find_task reads them (read_text), from a dict."""

    def __init__(self, files):
        self.files, self.read = files, []

    def read_text(self, path):
        self.read.append(path)
        return self.files.get(path)


def queue_row(job_id, comment):
    from runjob_slurm._parse import SqueueRow

    return SqueueRow(job_id=job_id, raw_id=job_id, state="PENDING", reason=None, start=None, end=None, elapsed=None,
                     nodes=None, partition=None, comment=comment, name="grid")


def test_an_element_is_found_in_its_array_by_the_array_index(tmp_path):
    from runjob_core.store import new_job_id

    scratch = "/s"
    ids = [new_job_id() for _ in range(3)]
    attempts = [Attempt(job_id=i, n=1, tag=f"runjob:{i}:1", layout=attempts_in(scratch, [i])[0].layout) for i in ids]
    folder = _array.array_dir(attempts[0])
    files = Files({f"{folder}/index": "".join(f"{i}.1\n" for i in ids)})
    old_first = "rj-" + "100000" + "abcdef"  # an array of long ago: its index is never read
    rows = {"70_0": queue_row("70_0", f"runjob-array:runjob:{old_first}:1"),
            "90_1": queue_row("90_1", f"runjob-array:runjob:{ids[0]}:1"),
            "90_2": queue_row("90_2", f"runjob-array:runjob:{ids[0]}:1"),
            "91": queue_row("91", None)}
    assert _array.find_task(files, attempts[2], rows, lambda: "") == "90_2"
    assert f"/s/arrays/{old_first}.1/index" not in files.read

    # Element 0's task ended and left the queue: accounting has it, by the array's script.
    sacct = f"90_0|grid|sbatch --parsable --chdir {folder} {folder}/array.sh\n90_1|grid|sbatch --parsable --chdir {folder} {folder}/array.sh\n"
    assert _array.find_task(files, attempts[0], rows, lambda: sacct) == "90_0"
    # The whole array left the queue.
    assert _array.find_task(files, attempts[1], {}, lambda: sacct) == "90_1"
    # An attempt no index lists never went out in an array.
    stranger = Attempt(job_id=new_job_id(), n=1, tag="t", layout=attempts[0].layout)
    assert _array.find_task(files, stranger, rows, lambda: sacct) is None


def test_an_array_submitted_before_the_index_is_found_by_its_marker():
    attempt = attempts_in("/s", ["old"])[0]
    marker = json.dumps({"comment": "runjob-array:runjob:rj-first:1", "task": 3, "script": "/s/jobs/f/array-1.sh"})
    files = Files({f"{attempt.layout.job_dir}/slurm-array-1.json": marker})
    rows = {"80_3": queue_row("80_3", "runjob-array:runjob:rj-first:1")}
    assert _array.find_task(files, attempt, rows, lambda: "") == "80_3"
