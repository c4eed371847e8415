"""vLLM's memory accounting by release (``vllm_version``, runjob_core/estimator/vllm_versions.py).

vLLM 0.2-0.6.3 sized the KV cache from ``total - free`` after the profile run (the CUDA
context inside ``gpu_memory_utilization``); 0.6.4 and later leave the context outside. The
figures below are worked out by hand from those two rules, not read back from the code.
"""

from __future__ import annotations

import json

import attrs
import pytest
from click.testing import CliRunner

from runjob_core.cli.estimate import command
from runjob_core.config import job_from_mapping
from runjob_core.errors import RunjobError
from runjob_core.estimator import estimate, jobspec, measured
from runjob_core.estimator.gpus import GIB, lookup_gpu
from runjob_core.models import ClusterConfig

A2_RUN = dict(dtype="fp16", gpu_memory_utilization=0.98, enforce_eager=True)


def test_llama2_7b_on_an_a2_at_2k_fits_on_vllm_0_3_3_and_4k_does_not():
    # vllm#2248: ran at max_model_len 2048 with 0.98 on vLLM 0.3.3, 4096 was refused
    assert estimate("Llama-2-7B", "inference", "A2", max_model_len=2048, vllm_version="0.3.3", **A2_RUN).fits
    assert not estimate("Llama-2-7B", "inference", "A2", max_model_len=4096, vllm_version="0.3.3", **A2_RUN).fits
    # a current vLLM keeps the CUDA context outside the budget: 2% of 14.75 GiB cannot hold it
    current = estimate("Llama-2-7B", "inference", "A2", max_model_len=2048, **A2_RUN)
    assert not current.fits and any("outside vLLM's budget" in n for n in current.notes)


def test_before_0_6_4_the_context_and_non_torch_memory_are_inside_the_budget():
    old = estimate("Qwen2.5-32B", "inference", "A100-80GB", max_model_len=32768, gpu_memory_utilization=1.0,
                   enforce_eager=True, vllm_version="0.6.3")
    vram = lookup_gpu("A100-80GB").total_bytes
    weights = old.weights_gib * GIB
    act = old.activations_gib * GIB
    assert old.breakdown["max_num_batched_tokens"] == 32768  # V0 without chunked prefill: max(max_model_len, 2048)
    assert old.breakdown["cuda_context_gib"] == 0.0
    assert old.breakdown["non_torch_gib"] == pytest.approx(0.35)
    assert old.breakdown["kv_available_gib"] * GIB == pytest.approx(vram - weights - act - 0.35 * GIB)
    assert old.fits  # Qwen2.5's speed benchmark ran this ('Setting 1') on vLLM 0.6.3
    new = estimate("Qwen2.5-32B", "inference", "A100-80GB", max_model_len=32768, gpu_memory_utilization=1.0,
                   enforce_eager=True, vllm_version="0.6.4", max_num_batched_tokens=32768)
    assert new.breakdown["cuda_context_gib"] == pytest.approx(0.5) and not new.fits


def test_the_profile_size_follows_the_release():
    def tokens(**kw):
        return estimate("Llama-3.1-8B", "inference", "H100", max_model_len=1024, **kw).breakdown["max_num_batched_tokens"]

    assert tokens(vllm_version="0.5.4") == 2048  # V0, max(max_model_len, 2048)
    assert tokens(vllm_version="0.7.3") == 2048
    assert tokens(vllm_version="0.8.0") == tokens() == 16384  # V1's chunked-prefill budget on an 80 GB card
    assert tokens(vllm_version="0.5.4", max_num_batched_tokens=512) == 512  # given: used as is


def test_before_0_6_4_only_cuda_graphs_need_the_slack():
    eager = estimate("Qwen2.5-7B", "inference", "A100-80GB", max_model_len=8192, gpu_memory_utilization=1.0,
                     enforce_eager=True, vllm_version="0.5.4")
    graphs = estimate("Qwen2.5-7B", "inference", "A100-80GB", max_model_len=8192, gpu_memory_utilization=1.0,
                      vllm_version="0.5.4")
    assert eager.fits and not graphs.fits
    assert any("less than the CUDA graphs need (0.50 GiB)" in n for n in graphs.notes)


def test_tensor_parallel_v0_adds_nccl_to_the_device_figure():
    est = estimate("Llama-3.1-70B", "inference", "A100-80GB", num_gpus=4, max_model_len=8192, vllm_version="0.4.0")
    assert est.breakdown["non_torch_gib"] == pytest.approx(0.35 + 0.3)


def test_assumptions_say_which_accounting_decided():
    old = estimate("Llama-2-7B", "inference", "A2", max_model_len=2048, vllm_version="v0.3.3", **A2_RUN)
    assert any("vLLM v0.3.3 counts the whole device's used memory" in line for line in old.assumptions)
    current = estimate("Llama-2-7B", "inference", "T4", max_model_len=2048, **A2_RUN)
    assert any("set vllm_version for older releases" in line for line in current.assumptions)


@pytest.mark.parametrize("text", ["latest", "0", "1.x", "0.6.3; rm -rf /"])
def test_a_bad_version_is_one_clear_error(text):
    with pytest.raises(RunjobError, match=r"vllm_version .* e\.g\. 0\.6\.3"):
        estimate("Llama-2-7B", "inference", "A2", vllm_version=text)


def test_release_suffixes_are_read():
    for text in ("0.6.4.post1", "0.3.3+cu118", "0.2.7"):
        assert estimate("Llama-2-7B", "inference", "A100-80GB", vllm_version=text).fits


def test_a_job_names_the_key_of_a_bad_version_and_passes_a_good_one():
    cluster = ClusterConfig(name="c", type="slurm", gpu_type="a2")
    spec = {"name": "gen", "command": "python gen.py", "template": "vllm", "model": {"name": "Llama-2-7B"},
            "resources": {"gpus": 1}}
    bad = job_from_mapping(dict(spec, params={"vllm_version": "new"}), source="gen.yaml")
    with pytest.raises(RunjobError, match=r"\$\.params\.vllm_version in gen.yaml"):
        jobspec.estimate_args(bad, cluster)
    good = job_from_mapping(dict(spec, params={"vllm_version": "0.3.3"}), source="gen.yaml")
    assert jobspec.estimate_args(good, cluster)[3]["vllm_version"] == "0.3.3"


def test_cli_option_and_measured_keys():
    r = CliRunner().invoke(command, ["--model", "Llama-2-7B", "--kind", "inference", "--gpu", "A2", "--dtype", "fp16",
                                     "--max-model-len", "2048", "--gpu-memory-utilization", "0.98", "--enforce-eager",
                                     "--vllm-version", "0.3.3", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["fits"] is True and data["settings"]["vllm_version"] == "0.3.3"
    # runs recorded before the setting existed keep their key; a stated release is a different shape
    plain = estimate("Llama-2-7B", "inference", "A100-80GB")
    assert measured.key_of(plain) != measured.key_of(estimate("Llama-2-7B", "inference", "A100-80GB", vllm_version="0.3.3"))
    older = attrs.evolve(plain, settings={k: v for k, v in plain.settings.items() if k != "vllm_version"})
    assert measured.key_of(plain) == measured.key_of(older)
