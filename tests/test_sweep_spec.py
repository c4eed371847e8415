import pytest

from runjob_core.errors import ConfigError
from runjob_core.sweep import expand_sweep


def test_grid_and_include_expand_with_safe_unique_names():
    spec = {"params": {"lr": 1}, "sweep": {"params": {"lr": [0.1, 0.2], "seed": [1, 2, 3]}, "include": [{"lr": 0.5, "seed": 9}]}}
    elements = expand_sweep(spec, "job.yaml")
    assert len(elements) == 7
    assert elements[0].spec["params"] == {"lr": 0.1, "seed": 1}
    assert elements[-1].values == {"lr": 0.5, "seed": 9}
    assert len({e.name for e in elements}) == 7
    assert all("/" not in e.name and " " not in e.name for e in elements)
    assert "sweep" not in elements[0].spec


def test_dotted_key_sets_spec_field():
    spec = {"name": "ev", "model": {"name": "a"}, "sweep": {"params": {"model.name": ["a/b", "c"], "benchmark": ["mmlu"]}}}
    elements = expand_sweep(spec, "job.yaml")
    assert elements[1].spec["benchmark"] == "mmlu"
    assert elements[1].spec["name"] == "ev-name-c_benchmark-mmlu"
    assert [e.spec["model"]["name"] for e in elements] == ["a/b", "c"]
    assert elements[0].name == "name-a_b_benchmark-mmlu"


@pytest.mark.parametrize(
    ("sweep", "path"),
    [
        ({"params": {"lr": []}}, "sweep.params.lr"),
        ({"params": {"lr": [1]}, "bogus": 1}, "sweep.bogus"),
        ({"include": [1]}, "sweep.include"),
        ({}, "sweep:"),
        ({"params": {"lr": [1]}, "max_parallel": 0}, "sweep.max_parallel"),
        ({"params": {"lr": [1]}, "name": 3}, "sweep.name"),
        ({"params": {"lr": [1]}, "name": "{nope}"}, "sweep.name"),
        ({"params": {"a": list(range(101)), "b": list(range(100))}}, "sweep.params"),
        ({"params": {"model.nmae": ["x"]}}, "sweep.params.model.nmae"),
        ({"include": [{"resources.gpu": 1}]}, "sweep.include[0].resources.gpu"),
        ({"params": {"name": ["a"]}}, "sweep.params.name"),
    ],
)
def test_errors_name_the_key_path(sweep, path):
    with pytest.raises(ConfigError) as info:
        expand_sweep({"sweep": sweep}, "job.yaml")
    assert f"job.yaml: {path}" in str(info.value)


def test_large_grid_allowed_with_flag():
    sweep = {"params": {"a": list(range(101)), "b": list(range(100))}}
    assert len(expand_sweep({"sweep": sweep}, "j.yaml", allow_large=True)) == 10_100


def test_name_template_and_duplicate_names_made_unique():
    spec = {"sweep": {"params": {"lr": [0.1, 0.2]}, "include": [{"lr": 0.1}], "name": "lr {lr}"}}
    names = [e.name for e in expand_sweep(spec, "job.yaml")]
    assert names == ["lr_0.1", "lr_0.2", "lr_0.1_2"]


def test_params_and_nested_spec_fields_are_accepted():
    spec = {"sweep": {"params": {"params.batch.size": [1], "resources.gpus": [1, 2], "env.X": ["1"], "lr": [1]}}}
    assert len(expand_sweep(spec, "job.yaml")) == 2
