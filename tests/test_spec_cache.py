"""The spec cache: an unchanged job or clusters file skips PyYAML and cattrs, and nothing
about what a file means (its checks, its errors, its records) changes because of it."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from runjob_core import config

from runjob_core.config import cache as _spec_cache

from runjob_core.config import converter as _structure
from runjob_core.errors import ConfigError
from runjob_core.models import ClusterConfig, Estimate, Submission

JOB = "name: cached\ncommand: echo hi\nresources: {gpus: 1, time: 2h}\nparams: {lr: 0.1, layers: [1, 2]}\n"


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNJOB_SPEC_CACHE", raising=False)
    return tmp_path / "cache" / "runjob" / "specs"


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pickle")) if folder.exists() else []


def test_second_load_of_an_unchanged_file_imports_neither_yaml_nor_cattrs(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    probe = ("import sys; from pathlib import Path; from runjob_core import config;"
             f"job = config.load_job(Path({str(job)!r}));"
             "print(job.name, job.resources.time, 'yaml' in sys.modules, 'cattrs' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home.parent.parent)}
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()
            for _ in range(2)]
    assert runs[0] == ["cached", "2h", "True", "True"]  # parsed and validated
    assert runs[1] == ["cached", "2h", "False", "False"]  # from the cache


def test_cached_job_equals_the_parsed_one_and_an_edit_is_seen(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    first = config.load_job(job)
    assert len(entries(cache_home)) == 1
    assert config.load_job(job) == first
    job.write_text(JOB.replace("gpus: 1", "gpus: 4"))
    assert config.load_job(job).resources.gpus == 4
    assert len(entries(cache_home)) == 2


def test_the_same_bytes_at_another_path_are_another_entry(tmp_path, cache_home):
    # source and base_dir are part of the record: a copy elsewhere must not get the first's.
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "job.yaml").write_text(JOB)
    jobs = [config.load_job(tmp_path / folder / "job.yaml") for folder in ("a", "b")]
    assert [Path(j.base_dir).name for j in jobs] == ["a", "b"]


def test_an_invalid_file_is_never_cached_and_reports_every_time(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_text("name: a\ncommand: x\nresources: {gpuz: 1}\n")
    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            config.load_job(job)
        assert "did you mean 'gpus'" in caught.value.problems[0]
    assert entries(cache_home) == []


def test_clusters_file_is_cached_too(tmp_path, cache_home):
    path = tmp_path / "clusters.yaml"
    path.write_text("clusters:\n  della: {type: slurm, host: della.example.edu, scratch_path: /scratch/me}\n")
    first = config.load_clusters(path)
    assert config.load_clusters(path) == first
    assert sorted(first) == ["della", "local"] and first["della"].host == "della.example.edu"
    assert [p.name.split("-")[0] for p in entries(cache_home)] == ["clusters"]


def test_a_damaged_entry_is_a_miss(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    first = config.load_job(job)
    [entry] = entries(cache_home)
    entry.write_bytes(b"\x80\x05not a pickle")
    assert config.load_job(job) == first
    assert pickle.loads(entry.read_bytes()) == first  # rewritten


def test_the_cache_is_used_only_in_a_folder_nobody_else_can_write(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    real = config.load_job(job)
    [entry] = entries(cache_home)
    planted = attrs.evolve(real, command="echo planted")
    entry.write_bytes(pickle.dumps(planted))
    cache_home.chmod(0o777)
    assert config.load_job(job).command == "echo hi"  # a folder others can write: ignored
    cache_home.chmod(0o700)
    assert config.load_job(job).command == "echo planted"  # private again: the entry is used


def test_template_bytecode_is_cached_only_in_a_private_folder(cache_home):
    from runjob_core import templating

    folder = cache_home.parent / "jinja"
    assert templating._bytecode_cache() is not None and (folder.stat().st_mode & 0o777) == 0o700
    folder.chmod(0o777)  # another user could plant bytecode here
    assert templating._bytecode_cache() is None


def test_runjob_spec_cache_0_turns_it_off(tmp_path, cache_home, monkeypatch):
    monkeypatch.setenv("RUNJOB_SPEC_CACHE", "0")
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    assert config.load_job(job).name == "cached"
    assert entries(cache_home) == []


def test_old_entries_are_pruned(tmp_path, cache_home, monkeypatch):
    monkeypatch.setattr(_spec_cache, "MAX_ENTRIES", 3)
    job = tmp_path / "job.yaml"
    for n in range(5):
        job.write_text(JOB.replace("gpus: 1", f"gpus: {n}"))
        config.load_job(job)
    assert len(entries(cache_home)) == 3


def test_a_non_utf8_file_is_one_clear_error(tmp_path, cache_home):
    job = tmp_path / "job.yaml"
    job.write_bytes(b"name: caf\xe9\ncommand: x\n")
    with pytest.raises(ConfigError) as caught:
        config.load_job(job)
    assert caught.value.problems == [f"{job} is not UTF-8 text (byte 9): save it as UTF-8"]


RICH = {"name": "rich", "command": "python train.py", "template": "training", "cluster": "c",
        "resources": {"gpus": 2, "time": "2h", "mem": "16G"},
        "params": {"lr": 0.1, "layers": [1, 2], "nested": {"a": None}},
        "env": {"A": "1"}, "setup": ["module load x"], "columns": {"score": "float"}}


def test_unstructure_gives_what_the_cattrs_converter_gives():
    job = config.job_from_mapping(RICH, source="x.yaml", base_dir="/tmp")
    records = [
        job,
        ClusterConfig(name="c", type="slurm", host="h", gpu_type="h100", env={"A": "1"}),
        Submission(job_id="rj-1", attempt=2, backend="slurm", cluster="c", backend_job_id="7", tag="t",
                   job_dir="/j", workdir="/w", log_path="/l", results_dir="/r", checkpoint_dir="/c",
                   progress_path="/p", submitted_at=1.5, source="sbatch", extra={"k": "v"}),
        Estimate(source="s", summary="fits", fits=True, suggestions=("a",), data={"x": [1, {"y": 2}]}),
    ]
    for record in records:
        ours = json.dumps(config.unstructure(record), sort_keys=True)
        assert ours == json.dumps(_structure.converter().unstructure(record), sort_keys=True)
        assert config.record_from_json(config.record_to_json(record), type(record)) == record


def test_spec_hash_is_stable_across_versions():
    # Stored attempts carry this hash; resuming compares it. Values computed by runjob 0.1.0
    # before the converter moved: a change here makes every stored job look edited.
    assert config.spec_hash(config.job_from_mapping(RICH, source="x.yaml", base_dir="/tmp")) == "e89924cb65ff52cc"
    hello = Path(__file__).parents[1] / "runjob_core" / "data" / "examples" / "hello.yaml"
    assert config.spec_hash(config.load_job(hello)) == "2e3695a1c8c5546f"
