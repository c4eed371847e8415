"""A sweep's elements are loaded and their spec texts written on a shorter path than a job's
(sections no value changes structured and written once: runjob_core/sweep/_jobs.py,
runjob_core/config/_spec_texts.py). Every element must still be exactly the job
``config.job_from_mapping`` makes of its spec, with the stored JSON and spec hash that
``config.spec_json_and_hash`` gives it byte for byte (stored jobs, reruns and idempotency
compare the hashes), and a bad element must fail with the job loader's own words."""

from __future__ import annotations

import pytest

from runjob_core import config
from runjob_core.config._spec_texts import spec_texts
from runjob_core.errors import ConfigError
from runjob_core.sweep import sweep_from_mapping

VARIED = {
    "name": "vary", "command": "python eval.py", "template": "training", "cluster": "c",
    "model": {"name": "Qwen/Qwen2.5-7B", "max_tokens": 512, "serve_args": ["--enforce-eager"]},
    "resources": {"gpus": 1, "time": "2h", "mem": "16G"},
    "data": {"input": "data/x.jsonl"}, "params": {"seed": 1, "nested": {"a": None, "b": [1, 2.5, "é"]}},
    "env": {"HF_HOME": "/scratch/hf"}, "setup": ["module load cuda"], "columns": {"score": "float"},
    "health": {"gpu_sample_seconds": 30, "gpu_idle_minutes": 20},
    "sweep": {
        "params": {"lr": [0.1, 1e-05, 3], "model.name": ["a/b", "c"], "resources.gpus": [1, 2], "flag": [True, None]},
        "include": [{"lr": 0.5, "env.EXTRA": "x y"}, {"model.max_tokens": 64, "tags": {"k": ["v", 1]}},
                    {"setup": ["module load a", "module load b"]}, {"health.gpu_sample_seconds": 0},
                    {"benchmark": "mmlu", "template": "base"}],
    },
}


def _slow(sweep, source="vary.yaml", base_dir="/tmp"):
    """Each element as a job of its own would be loaded, with its stored JSON and hash."""
    jobs = [config.job_from_mapping(e.spec, source=source, base_dir=base_dir) for e in sweep.elements]
    return jobs, [config.spec_json_and_hash(job) for job in jobs]


def test_varied_grid_elements_and_their_texts_equal_the_job_paths():
    sweep = sweep_from_mapping(VARIED, source="vary.yaml", base_dir="/tmp")
    jobs, texts = _slow(sweep)
    assert len(sweep.jobs) == 3 * 2 * 2 * 2 + 5
    assert list(sweep.jobs) == jobs
    assert list(zip(sweep.job_jsons, sweep.job_hashes)) == texts
    assert len(set(sweep.job_hashes)) == len(jobs)
    # The shorter path shares the untouched sections between elements (what makes it short).
    assert sweep.jobs[0].data is sweep.jobs[1].data
    assert sweep.jobs[0].model is not sweep.jobs[1].model  # model.name is swept


def test_spec_texts_match_one_by_one_for_any_jobs():
    sweep = sweep_from_mapping(VARIED, source="vary.yaml", base_dir="/tmp")
    jobs, texts = _slow(sweep)  # loaded apart: no section shared between them
    assert spec_texts(jobs) == texts
    assert spec_texts(jobs[:1]) == texts[:1]
    assert spec_texts([]) == []
    # A tuple in params (from Python, not YAML) is written as a list, as attrs.asdict makes it.
    odd = config.job_from_mapping({"name": "s", "command": "x", "params": {"t": (1, (2, "3"))}}, source="s.yaml")
    assert spec_texts([odd, odd]) == [config.spec_json_and_hash(odd)] * 2
    # A set (YAML's !!set) never could be stored: refused the same way.
    odd = config.job_from_mapping({"name": "s", "command": "x", "params": {"s": {1, 2}}}, source="s.yaml")
    with pytest.raises(TypeError):
        config.spec_json_and_hash(odd)
    with pytest.raises(TypeError):
        spec_texts([odd])


def test_hashes_stay_the_values_stored_jobs_carry():
    # Computed by the job path (config.spec_hash) before the sweep had a path of its own: a
    # change here makes every stored element look edited to a rerun.
    sweep = sweep_from_mapping({"name": "pin", "command": "true", "resources": {"gpus": 2, "time": "2h"},
                                "sweep": {"params": {"lr": [0.1, 0.2], "model.name": ["m"]}}}, source="pin.yaml")
    assert sweep.job_hashes == ("03df73c3fc20c08e", "1299c220c7723782")


@pytest.mark.parametrize("bad", [
    {"resources.gpus": ["x", 1]},          # a value of the wrong type in one element's own section
    {"env.TOKEN_LIKE": ["hf_" + "a" * 34, "plain"]},  # a token-shaped value
    {"resources.time": ["2h", "soon"]},    # structured, then refused by the job checks
])
def test_a_bad_element_fails_with_the_job_loaders_words(bad):
    spec = {**VARIED, "sweep": {"params": {"lr": [0.1], **bad}}}
    with pytest.raises(ConfigError) as fast:
        sweep_from_mapping(spec, source="vary.yaml", base_dir="/tmp")
    from runjob_core.sweep._spec import expand_sweep

    expected = []
    for element in expand_sweep(spec, "vary.yaml"):
        try:
            config.job_from_mapping(element.spec, source="vary.yaml", base_dir="/tmp")
        except ConfigError as exc:
            expected += [f"sweep element {element.index} ({element.name}): {p}" for p in exc.problems]
    assert expected
    assert fast.value.problems == expected


def test_a_bad_section_no_element_touches_fails_every_element_as_before():
    spec = {"name": "b", "command": "x", "resources": {"gpus": "many"}, "sweep": {"params": {"lr": [1, 2]}}}
    with pytest.raises(ConfigError) as exc:
        sweep_from_mapping(spec, source="b.yaml")
    assert len(exc.value.problems) == 2
    assert all("$.resources.gpus" in p for p in exc.value.problems)


@pytest.mark.parametrize("params", [
    {}, {"i": 5}, {"lr": 1e-05, "on": True, "none": None, "s": 'é"x\n', "nan": float("nan"), "inf": float("-inf"),
                   "z": -0.0, "big": 10 ** 30, "a": 2.5},
    {"nested": {"a": [1, 2]}}, {"list": [1, "x"]}, {"odd": {1, 2}},
])
def test_params_json_is_what_json_dumps_writes(params):
    # Each element's params.json: written by line for plain values, the same bytes as before.
    import json

    from runjob_core.staging import params_json

    assert params_json(params) == json.dumps(params, indent=2, sort_keys=True, default=str) + "\n"


@pytest.mark.parametrize("comment_lines", [0, 3, 200])
def test_array_resource_lines_are_the_whole_scripts(comment_lines):
    # An array's #SBATCH resource lines are read from the head of its first script; a head of
    # comments longer than that head must give what reading the whole script gives.
    from runjob_slurm._array import _PER_JOB, _resources

    script = "\n".join(["#!/bin/bash", "#SBATCH --job-name=x", "#SBATCH --partition=debug",
                        *[f"# a comment line {i} " + "x" * 30 for i in range(comment_lines)],
                        "#SBATCH --gres=gpu:1", "", "echo run", "#SBATCH --late=1", ""])
    whole = []
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            if line.split()[1].split("=")[0] not in _PER_JOB:
                whole.append(line)
        elif line.strip() and not line.startswith("#"):
            break
    assert _resources(script) == whole
    assert "#SBATCH --gres=gpu:1" in whole and "#SBATCH --late=1" not in whole
