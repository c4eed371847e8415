"""SLURM's cluster keys are runjob-slurm's declared options: still flat in clusters.yaml,
checked with one line naming file and key path, handed to the plugin typed, described by
the plugin where the core shows a cluster. No SLURM cluster needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runjob_core import config, lifecycle
from runjob_core.config import options
from runjob_core.errors import ConfigError
from runjob_core.models import ClusterConfig
from runjob_slurm import _options, _render
from runjob_slurm._options import SlurmOptions

#: A clusters.yaml as users wrote it before the keys moved out of the core (README, runjob init).
OLD_FILE = """\
clusters:
  della:
    type: slurm
    host: della.example.edu
    user: me
    default_partition: gpu
    default_account: mylab
    scratch_path: /scratch/me
    gres_format: generic
    gpu_type: h100
    modules: [cuda/12.4, cudnn]
    conda_env: rl
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(text)
    return path


def test_an_old_clusters_yaml_with_the_slurm_keys_still_loads(tmp_path):
    della = config.load_clusters(_write(tmp_path, OLD_FILE))["della"]
    assert della.options == SlurmOptions(default_partition="gpu", default_account="mylab", gres_format="generic",
                                         modules=("cuda/12.4", "cudnn"))
    assert (della.host, della.user, della.scratch_path, della.gpu_type, della.conda_env) == (
        "della.example.edu", "me", "/scratch/me", "h100", "rl")


def test_a_misspelled_slurm_key_is_one_line_naming_the_key_path(tmp_path):
    path = _write(tmp_path, OLD_FILE.replace("default_partition", "default_partiton"))
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path)
    assert caught.value.problems == [
        f"unknown key 'default_partiton' at $.clusters.della in {path} (backend 'slurm'); did you mean 'default_partition'?"]


def test_a_bad_gres_format_and_a_wrong_type_name_the_key_path(tmp_path):
    path = _write(tmp_path, OLD_FILE.replace("gres_format: generic", "gres_format: typd").replace("[cuda/12.4, cudnn]", "{a: 1}"))
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path)
    assert caught.value.problems == [f"expected a list of strings, got a dict at $.clusters.della.modules in {path}"]
    path = _write(tmp_path, OLD_FILE.replace("gres_format: generic", "gres_format: typd"))
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path)
    assert caught.value.problems == [f"gres_format must be 'typed' or 'generic', not 'typd' at $.clusters.della.gres_format in {path}"]


def test_the_command_line_error_is_one_line_without_a_traceback(tmp_path):
    path = _write(tmp_path, OLD_FILE.replace("default_partition", "default_partiton"))
    runjob = str(Path(sys.executable).parent / "runjob")
    result = subprocess.run([runjob, "clusters"], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "RUNJOB_CLUSTERS": str(path)})
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"unknown key 'default_partiton' at $.clusters.della in {path}" in result.stderr


def test_the_script_reads_the_options(tmp_path):
    della = config.load_clusters(_write(tmp_path, OLD_FILE))["della"]
    job = config.job_from_mapping({"name": "g", "command": "true", "resources": {"gpus": 2}}, source="g.yaml")
    assert _render.gres(job, della) == "gpu:2"  # generic
    assert _options.of(della).partition(job) == "gpu"
    own = config.job_from_mapping({"name": "g", "command": "true", "resources": {"partition": "debug"}}, source="g.yaml")
    assert _options.of(della).partition(own) == "debug"


def test_a_cluster_built_in_code_gets_the_defaults_or_checked_values():
    bare = ClusterConfig(name="c", type="slurm", host="h")
    assert _options.of(bare) == SlurmOptions()
    assert _options.of(ClusterConfig(name="c", type="slurm", host="h", options={"modules": ["x"]})).modules == ("x",)
    with pytest.raises(ConfigError) as caught:
        _options.of(ClusterConfig(name="c", type="slurm", host="h", options={"gres_format": "gen"}))
    assert caught.value.problems == ["gres_format must be 'typed' or 'generic', not 'gen' at $.clusters.c.gres_format in built-in"]


def test_the_plugin_describes_partition_and_account_where_the_core_shows_a_cluster(tmp_path):
    path = _write(tmp_path, OLD_FILE)
    della = config.load_clusters(path)["della"]
    assert options.describe(della) == [("partition", "gpu"), ("account", "mylab")]
    job = config.job_from_mapping({"name": "g", "command": "true", "resources": {"account": "other"}}, source="g.yaml")
    rows = dict(lifecycle.review_rows(job, della))
    assert (rows["partition"], rows["account"]) == ("gpu", "other")
    runjob = str(Path(sys.executable).parent / "runjob")
    env = {**os.environ, "RUNJOB_CLUSTERS": str(path), "COLUMNS": "200"}
    listed = subprocess.run([runjob, "clusters"], capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    assert "partition gpu, account mylab" in listed.stdout
    # --json shows each entry as the file reads: the SLURM keys flat beside the core's.
    data = json.loads(subprocess.run([runjob, "clusters", "--json"], capture_output=True, text=True, cwd=tmp_path, env=env,
                                     check=True).stdout)
    assert data["clusters"]["della"]["default_partition"] == "gpu" and data["clusters"]["della"]["modules"] == ["cuda/12.4", "cudnn"]


def test_clusters_keys_lists_the_declared_help(tmp_path):
    runjob = str(Path(sys.executable).parent / "runjob")
    data = json.loads(subprocess.run([runjob, "clusters", "keys", "slurm", "--json"], capture_output=True, text=True,
                                     cwd=tmp_path, check=True).stdout)
    keys = {k["name"]: k for k in data["keys"]}
    assert list(keys) == ["default_partition", "default_account", "gres_format", "modules"]
    assert keys["gres_format"]["choices"] == ["typed", "generic"] and keys["gres_format"]["default"] == "typed"
    assert all(k["help"] for k in keys.values()) and data["required_core_keys"] == ["host"]


def test_runjob_init_writes_the_declared_keys_as_an_entry_that_loads_when_uncommented(tmp_path):
    runjob = str(Path(sys.executable).parent / "runjob")
    subprocess.run([runjob, "init"], capture_output=True, text=True, cwd=tmp_path, check=True)
    written = (tmp_path / ".runjob" / "clusters.yaml").read_text()
    block = written[written.index("  # my-slurm:"):].split("\n\n")[0]
    assert "#   gres_format: typed" in block and "# typed: --gres=gpu:h100:N" in block  # the declared help
    entry = [line.replace("  # ", "  ", 1) for line in block.splitlines() if not line.lstrip("# ").startswith("(")]
    path = _write(tmp_path, "clusters:\n" + "\n".join(entry) + "\n")
    cluster = config.load_clusters(path)["my-slurm"]
    assert cluster.host == "login.example.edu"
    assert cluster.options == SlurmOptions(default_partition="gpu", default_account="mylab", modules=("cuda/12.4",))
