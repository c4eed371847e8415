"""The shipped pack: every reference loads, is sourced, has rules that validate and the sections."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from runjob_core import references
from runjob_core.config import job_from_mapping

PACK = references.builtin_references()
EXPECTED = {"GSM8K", "MATH-500", "AIME", "MMLU", "MMLU-Pro", "GPQA Diamond", "HumanEval", "LiveCodeBench"}


def test_pack_has_at_least_the_eight_core_benchmarks():
    assert len(PACK) >= 8
    assert EXPECTED <= {r.name for r in PACK}
    assert all(r.source == "runjob-core" for r in PACK)


def test_pack_files_are_package_data():
    folder = files("runjob_core") / "data" / "references"
    names = {entry.name for entry in folder.iterdir() if entry.name.endswith(".md")}
    assert len(names) == len(PACK)


@pytest.mark.parametrize("reference", PACK, ids=lambda r: r.name)
def test_each_reference_is_complete(reference):
    meta = references.reference_metadata(reference)
    assert meta["name"] == reference.name
    assert len(meta["sources"]) >= 3
    assert all(re.match(r"^https://\S+$", s) for s in meta["sources"]), meta["sources"]
    for key in ("description", "dataset", "scoring", "prompt_format"):
        assert meta.get(key), key
    assert "num_fewshot" in meta and "expected_max_tokens" in meta
    for section in references.SECTIONS:
        assert re.search(rf"^## {section}\b", reference.body, re.MULTILINE), section
    assert reference.rules, "every shipped reference has machine-checkable rules"
    # Rules are valid (they were validated on load; validate again as a plugin would).
    assert references.validate_rules(list(reference.rules), reference.name) == reference.rules
    for rule in reference.rules:
        assert rule["why"] and "\n" not in rule["why"]
        assert rule["severity"] in ("error", "warning")


def test_names_and_aliases_are_unambiguous_across_the_pack():
    owners: dict[str, str] = {}
    for reference in PACK:
        for name in (reference.name, *reference.aliases):
            key = references.normalize(name)
            assert owners.setdefault(key, reference.name) == reference.name, f"{name!r} names two references"


@pytest.mark.parametrize("name", ["gsm8k", "GSM-8K", "openai/gsm8k", "MATH500", "math_500", "HuggingFaceH4/MATH-500", "aime25",
                                  "AIME 2024", "mmlu", "mmlu_pro", "gpqa", "gpqa_diamond", "openai_humaneval", "lcb", "ifeval",
                                  "arc_challenge"])
def test_common_spellings_resolve(name):
    assert references.find_reference(name, PACK) is not None


def test_a_well_set_up_job_passes_every_applicable_rule():
    def job(benchmark, **fields):
        return job_from_mapping({"name": "ok", "command": "true", "benchmark": benchmark, **fields}, source="ok.yaml")

    good = {
        "GSM8K": job("gsm8k", model={"max_tokens": 1024}, params={"num_fewshot": 8}),
        "MATH-500": job("math-500", data={"input": "HuggingFaceH4/MATH-500"}, model={"max_tokens": 4096}, params={"num_fewshot": 0}),
        "AIME": job("aime24", model={"max_tokens": 32768, "path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"},
                    params={"n_samples": 16, "temperature": 0.6, "num_fewshot": 0}),
        "MMLU": job("mmlu", params={"num_fewshot": 5}),
        "GPQA Diamond": job("gpqa-diamond", data={"input": "gpqa_diamond"}, model={"max_tokens": 4096},
                            params={"shuffle_choices": True}),
        "LiveCodeBench": job("lcb", model={"max_tokens": 4096}, params={"start_date": "2024-08-01", "end_date": "2025-01-31",
                                                                         "release_version": "release_v5"}),
    }
    for name, spec in good.items():
        results = references.check_rules(references.find_reference(spec.benchmark, PACK), spec)
        assert results and all(r.ok for r in results), (name, [r.message for r in results if not r.ok])
