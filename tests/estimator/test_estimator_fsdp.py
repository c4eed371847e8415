"""FSDP's root unit (issue 28, family 7) and the assumption lines of sharded and offloaded training.

FSDP does not reshard its root unit after forward; when the decoder layers are the only
auto-wrapped units, the root holds the embedding, final norm and LM head, whole on every GPU
until backward ends (``fsdp_root embeddings``). DeepSpeed ZeRO-3, or FSDP with the embedding
and LM head as units of their own (torchtune's ``custom_sharded_layers``), keep nothing
beyond the gathered layers (``sharded``, the default).
"""

from __future__ import annotations

import json

import pytest

from runjob_core.config import job_from_mapping
from runjob_core.errors import RunjobError
from runjob_core.estimator import estimate, jobspec
from runjob_core.models import ClusterConfig

GIB = 1 << 30
OFFLOAD = dict(num_gpus=2, zero_stage=3, cpu_offload=True, grad_checkpointing=True, seq_len=2048, batch=2)


def test_the_root_keeps_embedding_norm_and_lm_head_whole_in_the_compute_dtype():
    sharded = estimate("Llama-2-70B", "qlora", "RTX-3090", **OFFLOAD)
    rooted = estimate("Llama-2-70B", "qlora", "RTX-3090", fsdp_root="embeddings", **OFFLOAD)
    # Llama-2-70B: untied 32000 x 8192 embedding and LM head + the 8192 final norm, bf16 (never NF4)
    assert rooted.breakdown["fsdp_root_gib"] == pytest.approx((2 * 32000 * 8192 + 8192) * 2 / GIB)
    assert sharded.breakdown["fsdp_root_gib"] == 0
    assert rooted.torch_peak_gib - sharded.torch_peak_gib == pytest.approx(rooted.breakdown["fsdp_root_gib"])


def test_a_full_fine_tune_also_holds_the_lm_heads_gradient_and_a_tied_head_counts_once():
    kw = dict(OFFLOAD, master_weights=False)
    full = estimate("Llama-3.1-8B", "full_ft", "A100-80GB", fsdp_root="embeddings", **kw)
    # untied 128256 x 4096 embedding and head, the norm, and the head's gradient: bf16
    assert full.breakdown["fsdp_root_gib"] == pytest.approx((3 * 128256 * 4096 + 4096) * 2 / GIB)
    tied = estimate("Llama-3.2-1B", "full_ft", "A100-80GB", fsdp_root="embeddings", **kw)
    assert tied.breakdown["fsdp_root_gib"] == pytest.approx((2 * 128256 * 2048 + 2048) * 2 / GIB)


def test_nothing_is_kept_without_sharding_over_gpus_or_offload():
    alone = estimate("Llama-3.1-8B", "lora", "A100-80GB", zero_stage=3, fsdp_root="embeddings")
    zero2 = estimate("Llama-3.1-8B", "full_ft", "A100-80GB", num_gpus=8, zero_stage=2, fsdp_root="embeddings")
    assert alone.breakdown["fsdp_root_gib"] == 0 and zero2.breakdown["fsdp_root_gib"] == 0


def test_sharded_and_offloaded_training_states_what_stays_on_the_gpu():
    rooted = estimate("Llama-2-70B", "qlora", "RTX-3090", fsdp_root="embeddings", **OFFLOAD)
    text = "\n".join(rooted.assumptions)
    assert "FSDP root unit (embedding, final norm, LM head) kept whole" in text and "0.98 GiB" in text
    assert "two layers' weights whole at a time" in text and "the optimizer steps on the CPU" in text
    plain = "\n".join(estimate("Llama-3.1-8B", "full_ft", "A100-80GB", num_gpus=8, zero_stage=3).assumptions)
    assert "set fsdp_root embeddings" in plain and "CPU offload" not in plain


@pytest.mark.parametrize("kind, says", [("full_ft", "only the largest parameter's gradient is whole at once"),
                                        ("lora", "the adapters' gradients are counted whole")])
def test_optimizer_in_backward_says_which_gradients_it_counts(kind, says):
    est = estimate("Llama-3.2-3B", kind, "A100-80GB", optimizer_in_bwd=True, master_weights=False)
    assert any(says in line for line in est.assumptions)


def test_a_job_sets_fsdp_root_in_params_and_a_bad_value_names_the_key():
    cluster = ClusterConfig(name="c", type="slurm", gpu_type="rtx-3090")

    def job(value):
        return job_from_mapping({"name": "ft", "command": "python train.py", "template": "training",
                                 "model": {"name": "Llama-2-70B"}, "resources": {"gpus": 2},
                                 "params": {"method": "qlora", "zero_stage": 3, "cpu_offload": True,
                                            "fsdp_root": value}}, source="ft.yaml")

    _model, _kind, _gpu, kw = jobspec.estimate_args(job("embeddings"), cluster)
    assert kw["fsdp_root"] == "embeddings"
    with pytest.raises(RunjobError, match=r"\$\.params\.fsdp_root in ft.yaml: use sharded, embeddings"):
        jobspec.estimate_args(job("everything"), cluster)
    with pytest.raises(RunjobError, match="unknown fsdp_root 'whole'"):
        estimate("Llama-2-70B", "qlora", "RTX-3090", fsdp_root="whole", **OFFLOAD)


def test_the_cli_flag_reaches_the_estimate(runjob_cli):
    args = ["estimate", "--model", "Llama-2-70B", "--kind", "qlora", "--gpu", "rtx-3090", "--num-gpus", "2",
            "--zero-stage", "3", "--cpu-offload", "--grad-checkpointing", "--json"]
    rooted = json.loads(runjob_cli(*args, "--fsdp-root", "embeddings").output)
    plain = json.loads(runjob_cli(*args).output)
    assert rooted["breakdown"]["fsdp_root_gib"] > 0.9 and plain["breakdown"]["fsdp_root_gib"] == 0
    assert rooted["settings"]["fsdp_root"] == "embeddings"


def test_the_preflight_summary_names_the_root_it_counted():
    from runjob_core.estimator import preflight

    cluster = ClusterConfig(name="c", type="slurm", gpu_type="rtx-3090")
    job = job_from_mapping({"name": "ft", "command": "python train.py", "template": "training",
                            "model": {"name": "Llama-2-70B"}, "resources": {"gpus": 2},
                            "params": {"method": "qlora", "zero_stage": 3, "cpu_offload": True,
                                       "gradient_checkpointing": True, "fsdp_root": "embeddings"}},
                           source="ft.yaml")
    est = preflight.memory_estimate(job, cluster, None, "runjob-core")
    assumed = est.summary.split("\n")[1:]
    assert any("FSDP root unit" in line and "0.98 GiB" in line for line in assumed)
    assert est.data["breakdown"]["fsdp_root_gib"] == pytest.approx(0.977, abs=1e-3)
