"""Config loading: every bad input gives one line naming the file and the key path."""

from pathlib import Path

import pytest

from runjob_core import config
from runjob_core.errors import ConfigError


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        config.load_job(path)
    return caught.value.problems


def test_valid_job_loads_with_defaults(tmp_path):
    job = config.load_job(write(tmp_path, "job.yaml", "name: a\ncommand: echo hi\nresources: {gpus: 2, time: '1:00:00'}\n"))
    assert (job.name, job.resources.gpus, job.template, job.cluster) == ("a", 2, "base", "local")
    assert job.source.endswith("job.yaml")


def test_unknown_key_names_path_file_and_suggestion(tmp_path):
    [line] = problems(write(tmp_path, "job.yaml", "name: a\ncommand: x\nresources: {gpuz: 1}\n"))
    assert "unknown key 'gpuz' at $.resources in" in line and "job.yaml" in line and "did you mean 'gpus'" in line


def test_top_level_typo(tmp_path):
    [line] = problems(write(tmp_path, "job.yaml", "name: a\ncommand: x\nresourcs: {}\n"))
    assert line.startswith("unknown key 'resourcs' at $ in ") and "resources" in line


def test_wrong_type_and_several_problems_reported_together(tmp_path):
    lines = problems(write(tmp_path, "job.yaml", "name: a\ncommand: x\nresources: {gpus: two, cpus: 1.5}\nbogus: 1\n"))
    assert any("expected an integer, got 'two' at $.resources.gpus" in p for p in lines)
    assert any("at $.resources.cpus" in p for p in lines)
    assert any("unknown key 'bogus'" in p for p in lines)


def test_yaml_syntax_error_has_line(tmp_path):
    [line] = problems(write(tmp_path, "job.yaml", "name: a\ncommand: [unclosed\n"))
    assert "YAML syntax error" in line and "line 3" in line


@pytest.mark.parametrize("name", ["x; touch /tmp/pwned", "$(id)", "a b", "../up", "-flag"])
def test_hostile_job_names_are_rejected(tmp_path, name):
    [line] = problems(write(tmp_path, "job.yaml", f"name: {name!r}\ncommand: x\n"))
    assert "invalid job name" in line and "$.name" in line


def test_bad_duration_and_memory(tmp_path):
    lines = problems(write(tmp_path, "job.yaml", "name: a\ncommand: x\nresources: {time: soon, mem: lots}\n"))
    assert any("$.resources.time" in p for p in lines) and any("$.resources.mem" in p for p in lines)


def test_missing_file_and_empty_file(tmp_path):
    assert "file not found" in problems(tmp_path / "nope.yaml")[0]
    assert "is empty" in problems(write(tmp_path, "empty.yaml", ""))[0]


@pytest.mark.parametrize("text, seconds", [("90", 5400), ("1:30", 90), ("2:00:00", 7200), ("1-00:00:00", 86400),
                                           ("1-2", 93600), ("30m", 1800), ("2h", 7200), (15, 900)])
def test_parse_duration(text, seconds):
    assert config.parse_duration(text) == seconds


def test_format_slurm_time_rounds_up_to_minutes():
    assert config.format_slurm_time(61) == "00:02:00"
    assert config.format_slurm_time(86400 + 3600) == "1-01:00:00"


def test_clusters_file_lookup_order(tmp_path, monkeypatch):
    monkeypatch.delenv("RUNJOB_CLUSTERS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.chdir(tmp_path)
    assert config.find_clusters_file() is None
    user = tmp_path / "cfg" / "runjob" / "clusters.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("clusters: {}\n")
    assert config.find_clusters_file() == user
    raca = tmp_path / ".raca" / "clusters.yaml"
    raca.parent.mkdir()
    raca.write_text("clusters: {}\n")
    assert config.find_clusters_file().resolve() == raca.resolve()
    own = tmp_path / ".runjob" / "clusters.yaml"
    own.parent.mkdir()
    own.write_text("clusters: {}\n")
    assert config.find_clusters_file().resolve() == own.resolve()


def test_builtin_local_cluster_without_any_file(tmp_path):
    clusters = config.load_clusters(None) if config.find_clusters_file() is None else {"local": config.local_cluster()}
    assert clusters["local"].type == "local"


def test_cluster_errors_name_the_cluster_key(tmp_path):
    path = write(tmp_path, "clusters.yaml", "clusters:\n  della:\n    type: slurm\n    hots: x\n    port: twenty\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path)
    text = "\n".join(caught.value.problems)
    assert "unknown key 'hots' at $.clusters.della" in text and "did you mean 'host'" in text
    assert "$.clusters.della.port" in text


def test_cluster_fields_of_the_seed_config(tmp_path):
    path = write(tmp_path, "clusters.yaml", """
clusters:
  della:
    type: slurm
    host: della.example.edu
    user: me
    default_partition: gpu
    default_account: mylab
    scratch_path: /scratch/me
    gres_format: typed
    gpu_type: h100
    modules: [cuda/12.4]
    conda_env: rl
""")
    della = config.load_clusters(path)["della"]
    assert (della.host, della.gpu_type, della.conda_env, della.source) == ("della.example.edu", "h100", "rl", str(path))
    # The SLURM keys are runjob-slurm's declared options (plugins/slurm/tests/test_slurm_options.py).
    assert (della.options.default_partition, della.options.modules, della.options.gres_format) == ("gpu", ("cuda/12.4",), "typed")


def test_a_backend_key_on_a_cluster_of_another_type_says_whose_it_is(tmp_path):
    path = write(tmp_path, "clusters.yaml", "clusters:\n  box:\n    type: local\n    default_partition: gpu\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path)
    assert caught.value.problems == [
        f"unknown key 'default_partition' at $.clusters.box in {path} (backend 'local'); it is a key of 'slurm' clusters: "
        "remove it, or set type: slurm"]


def test_spec_hash_ignores_location_but_not_parameters(tmp_path):
    a = config.job_from_mapping({"name": "a", "command": "x", "params": {"lr": 1}}, source="a.yaml", base_dir="/one")
    b = config.job_from_mapping({"name": "a", "command": "x", "params": {"lr": 1}}, source="b.yaml", base_dir="/two")
    c = config.job_from_mapping({"name": "a", "command": "x", "params": {"lr": 2}}, source="a.yaml", base_dir="/one")
    assert config.spec_hash(a) == config.spec_hash(b) != config.spec_hash(c)
    assert config.job_from_json(config.job_to_json(a)) == a
    # What a submit stores, from one unstructure: the same text and hash.
    assert config.spec_json_and_hash(c) == (config.job_to_json(c), config.spec_hash(c))


@pytest.mark.parametrize("key", ["HF_TOKEN", "RUNPOD_API_KEY", "WANDB_API_KEY", "MY_SERVICE_TOKEN"])
def test_tokens_in_job_env_are_refused(tmp_path, key):
    [line] = problems(write(tmp_path, "job.yaml", f"name: a\ncommand: x\nenv: {{{key}: hf_abc}}\n"))
    assert f"$.env.{key}" in line and "environment" in line and "hf_abc" not in line
