"""Addressing one element of a sweep where a job is taken: ``SWEEP/INDEX``, ``SWEEP/ELEMENT-NAME``,
``SWEEP/key=value,...``; one clear error for a reference that names no element, or several."""

import json

import pytest

from runjob_core.errors import JobNotFoundError
from runjob_core.sweep._address import find_job, ref_of, resolve

ELEMENTS = [{"index": i, "name": f"lr-{lr}_seed-{seed}_model-{m.split('/')[-1]}", "job": f"grid-{i}",
             "values": {"lr": lr, "seed": seed, "model.name": m}}
            for i, (lr, seed, m) in enumerate((lr, seed, m) for lr in (0.1, 0.001) for seed in (1, 2)
                                              for m in ("Qwen/Qwen3-8B",))]


@pytest.fixture
def store(state):
    store = state.open()  # SQLite and PostgreSQL (tests/conftest.py)
    store.create_sweep(sweep_id="sw-1", name="grid", spec_hash="h", spec_json="{}",
                       elements_json=json.dumps(ELEMENTS), max_parallel=2)
    for index in (0, 1, 3):  # element 2 not submitted yet
        store.create_job(name=f"grid-{index}", cluster="local", backend="local", spec_json="{}", spec_hash=f"h{index}",
                         spec_path=None, sweep_id="sw-1", sweep_index=index)
    yield store
    store.close()


@pytest.mark.parametrize("ref, index", [
    ("grid/3", 3), ("sw-1/0", 0), ("grid/lr-0.1_seed-2_model-Qwen3-8B", 1), ("grid/lr=0.1,seed=2", 1),
    ("grid/seed=2,lr=0.001", 3), ("grid/lr=1e-3,seed=2", 3), ("grid/lr=.001,seed=2.0", 3),
    ("grid/model.name=Qwen/Qwen3-8B,lr=0.1,seed=1", 0), ("grid/name=Qwen/Qwen3-8B,lr=0.1,seed=1", 0),
])
def test_an_element_is_found_by_index_name_or_values(store, ref, index):
    found = resolve(store, ref)
    assert found.index == index and found.sweep.id == "sw-1"
    if index != 2:
        assert find_job(store, ref).name == f"grid-{index}"
    assert ref_of(found.sweep, index) == f"sw-1/{index}"


@pytest.mark.parametrize("ref, message", [
    ("grid/4", "grid/4: sweep grid has 4 elements (0 to 3); no element 4"),
    ("nope/1", "nope/1: no sweep with name or id 'nope'"),
    ("grid/lr-9", "grid/lr-9: sweep grid has no element 'lr-9' (an index 0 to 3"),
    ("grid/lr=0.5", "grid/lr=0.5: no element of sweep grid has lr=0.5 (lr takes 0.001, 0.1)"),
    ("grid/lr=0.1", "grid/lr=0.1: 2 elements of sweep grid match (0 (lr-0.1_seed-1_model-Qwen3-8B), "
                    "1 (lr-0.1_seed-2_model-Qwen3-8B)); give seed, model.name too"),
    ("grid/lx=1", "grid/lx=1: sweep grid sweeps no key 'lx' (its keys: lr, seed, model.name)"),
    ("grid/lr", "grid/lr: sweep grid has no element 'lr'"),
    ("grid/lr=0.1,seed", "grid/lr=0.1,seed: 'seed' is not key=value"),
    ("grid/2", "grid/2: element 2 (lr-0.001_seed-1_model-Qwen3-8B) of sweep grid has not been submitted yet"),
])
def test_a_reference_naming_no_single_element_is_one_clear_error(store, ref, message):
    with pytest.raises(JobNotFoundError) as caught:
        find_job(store, ref)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_plain_job_name_is_not_an_element(store):
    assert find_job(store, "grid-1").sweep_index == 1
