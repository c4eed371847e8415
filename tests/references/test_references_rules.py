"""Rules: validation of malformed references, checking jobs, conditions, triviality, review."""

from __future__ import annotations

import pytest

from runjob_core import references
from runjob_core.config import job_from_mapping
from runjob_core.errors import ConfigError
from runjob_core.models import Reference

GSM8K = references.find_reference("gsm8k", references.builtin_references())


def job(**fields):
    return job_from_mapping({"name": "j", "command": "python eval.py", **fields}, source="job.yaml")


def parse(front: str) -> Reference:
    return references.parse_reference(f"---\n{front}---\n# body\n", label="bad.md")


def problems(front: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(front)
    return info.value.problems


@pytest.mark.parametrize("front, expected", [
    ("aliases: [x]\n", "required key missing at $.name in bad.md"),
    ("name: X\nrulez: []\n", "unknown key 'rulez' at $ in bad.md; did you mean 'rules'?"),
    ("name: X\nrules: {path: model.max_tokens}\n", "expected a list of rules at $.rules in bad.md"),
    ("name: X\nrules:\n  - {min: 3, why: w}\n", "required key missing at $.rules[0].path in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, why: w}\n", "no check at $.rules[0] in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, mni: 3, why: w}\n", "unknown key 'mni' at $.rules[0] in bad.md; did you mean 'min'?"),
    ("name: X\nrules:\n  - {path: params.k, min: lots, why: w}\n", "min must be a number at $.rules[0].min in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, min: 5, max: 1, why: w}\n", "min 5 is above max 1 at $.rules[0] in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, one_of: [], why: w}\n", "one_of must be a non-empty list of values at $.rules[0].one_of"),
    ("name: X\nrules:\n  - {path: data.input, matches: '(', why: w}\n", "invalid regular expression at $.rules[0].matches in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, required: yes please, why: w}\n", "required must be true or false at $.rules[0].required"),
    ("name: X\nrules:\n  - {path: params.k, equals: 1, severity: fatal, why: w}\n",
     "severity must be 'error' or 'warning' at $.rules[0].severity in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, equals: 1}\n", "required key missing at $.rules[0].why in bad.md"),
    ("name: X\nrules:\n  - {path: modle.max_tokens, min: 1, why: w}\n",
     "unknown job spec field 'modle' in path 'modle.max_tokens' at $.rules[0].path in bad.md; did you mean 'model'?"),
    ("name: X\nrules:\n  - {path: model.max_token, min: 1, why: w}\n",
     "unknown field 'max_token' of model in path 'model.max_token' at $.rules[0].path in bad.md; did you mean 'model.max_tokens'?"),
    ("name: X\nrules:\n  - {path: params, min: 1, why: w}\n", "path 'params' must name a key of params at $.rules[0].path"),
    ("name: X\nrules:\n  - {path: benchmark.name, equals: a, why: w}\n", "benchmark has no fields in path 'benchmark.name' at $.rules[0].path"),
    ("name: X\nrules:\n  - {path: params.k, equals: 1, why: w, when: {path: params.j, severity: error}}\n",
     "unknown key 'severity' at $.rules[0].when in bad.md"),
    ("name: X\nrules:\n  - {path: params.k, equals: 1, why: w, when: [{path: params.j}]}\n", "no check at $.rules[0].when[0] in bad.md"),
    ("name: X\nnum_fewshot: five\n", "num_fewshot must be a count, a list of counts or null at $.num_fewshot in bad.md"),
    ("name: X\nexpected_max_tokens: {reasoning: lots}\n", "expected a positive token count at $.expected_max_tokens.reasoning in bad.md"),
    ("name: X\nsources: {a: b}\n", "expected a list of strings at $.sources in bad.md"),
])
def test_malformed_references_name_the_file_and_key_path(front, expected):
    found = problems(front)
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_of_a_file_is_reported_together(tmp_path):
    path = tmp_path / "two.md"
    path.write_text("---\nname: X\nrules:\n  - {path: params.k, min: a, why: w}\n  - {path: params.j, equals: 1}\n---\n")
    with pytest.raises(ConfigError) as info:
        references.load_reference_file(path)
    assert len(info.value.problems) == 2 and all(str(path) in p for p in info.value.problems)
    assert info.value.source == str(path)


def test_yaml_errors_and_unclosed_front_matter():
    with pytest.raises(ConfigError, match=r"YAML syntax error in the front matter of bad.md line 3"):
        references.parse_reference("---\nname: X\n\tfoo: 1\n---\n", label="bad.md")
    with pytest.raises(ConfigError, match="front matter of bad.md is not closed"):
        references.parse_reference("---\nname: X\n", label="bad.md")
    with pytest.raises(ConfigError, match="expected a mapping at \\$ in the front matter"):
        references.parse_reference("---\n- a\n---\n", label="bad.md")


def test_extension_keys_are_kept():
    meta = references.validate_front_matter({"name": "X", "x-owner": "me"}, "x.md")
    assert meta["x-owner"] == "me"


def test_a_bad_gsm8k_job_gets_findings_with_the_fix():
    bad = job(benchmark="gsm8k", model={"path": "meta-llama/Llama-3.1-8B-Instruct", "max_tokens": 256}, params={"num_fewshot": 3})
    results = references.check_rules(GSM8K, bad)
    failed = {r.path: r for r in results if not r.ok}
    assert set(failed) == {"params.num_fewshot", "model.max_tokens"}
    fewshot = failed["params.num_fewshot"]
    assert fewshot.severity == "warning" and fewshot.value == 3
    assert fewshot.message == "params.num_fewshot is 3; the reference expects one of 0, 5, 8: set params.num_fewshot to one of 0, 5, 8"
    assert "8-shot" in fewshot.why
    assert failed["model.max_tokens"].message.endswith("raise model.max_tokens to at least 512")
    assert all(r.reference == "GSM8K" for r in results)


def test_a_good_gsm8k_job_passes():
    good = job(benchmark="gsm8k", model={"max_tokens": 1024}, params={"num_fewshot": 8, "data_source": "openai/gsm8k"})
    results = references.check_rules(GSM8K, good)
    assert [r.path for r in results] == ["params.num_fewshot", "model.max_tokens", "params.data_source"]
    assert all(r.ok for r in results)
    assert results[0].message == "params.num_fewshot = 8"


def test_reasoning_models_get_the_long_max_tokens_rule():
    r1 = job(benchmark="gsm8k", model={"path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "max_tokens": 1024}, params={"num_fewshot": 0})
    failed = [r for r in references.check_rules(GSM8K, r1) if not r.ok]
    assert [r.message for r in failed] == [
        "model.max_tokens is 1024; the reference expects at least 4096: raise model.max_tokens to at least 4096"]
    flagged = job(benchmark="gsm8k", model={"max_tokens": 1024}, params={"num_fewshot": 0, "reasoning": True})
    assert not all(r.ok for r in references.check_rules(GSM8K, flagged))


def rule_ref(*rules) -> Reference:
    return Reference(name="T", source="project", rules=tuple(rules))


def test_missing_values_required_fails_with_its_severity_others_warn():
    reference = rule_ref(
        {"path": "params.seed", "required": True, "severity": "error", "why": "reproducibility"},
        {"path": "params.k", "min": 4, "severity": "error", "why": "noise"},
        {"path": "env.HF_TOKEN", "required": True, "matches": "^hf_", "severity": "warning", "why": "gated data"},
    )
    results = references.check_rules(reference, job())
    assert [(r.ok, r.severity) for r in results] == [(False, "error"), (False, "warning"), (False, "warning")]
    assert results[0].message == "params.seed is not set; the reference requires it: set params.seed in the job spec"
    assert results[1].message == "params.k is not set; the reference expects at least 4: raise params.k to at least 4"
    assert results[2].message.startswith("env.HF_TOKEN is not set; the reference requires a value matching /^hf_/")


def test_each_check_kind():
    reference = rule_ref(
        {"path": "template", "equals": "vllm", "why": "w"},
        {"path": "params.split", "one_of": ["test"], "why": "w"},
        {"path": "model.max_tokens", "min": 10, "max": 20, "why": "w"},
        {"path": "data.input", "matches": "(?i)^org/", "why": "w"},
        {"path": "params.n", "min": 1, "why": "w", "fix": "pass --n to the script"},
        {"path": ["model.path", "model.name"], "matches": "qwen", "why": "w"},
    )
    ok = job(template="vllm", model={"max_tokens": 15, "name": "qwen"}, data={"input": "ORG/set"}, params={"split": "test", "n": 2.0})
    assert all(r.ok for r in references.check_rules(reference, ok))
    bad = job(template="base", model={"max_tokens": 25, "path": "llama", "name": "qwen"}, data={"input": "mine/set"},
              params={"split": "train", "n": "many"})
    results = references.check_rules(reference, bad)
    assert [r.ok for r in results] == [False] * 6
    messages = [r.message for r in results]
    assert messages[0] == "template is 'base'; the reference expects 'vllm': set template to 'vllm'"
    assert messages[2] == "model.max_tokens is 25; the reference expects between 10 and 20: set model.max_tokens between 10 and 20"
    assert messages[4] == "params.n is 'many', not a number; the reference expects at least 1: pass --n to the script"
    assert results[5].path == "model.path|model.name" and results[5].value == "llama"  # the first path that is set


def test_numbers_compare_by_value_and_booleans_are_not_numbers():
    reference = rule_ref({"path": "params.k", "equals": 8, "why": "w"}, {"path": "params.flag", "min": 1, "why": "w"})
    results = references.check_rules(reference, job(params={"k": 8.0, "flag": True}))
    assert results[0].ok and not results[1].ok


def test_when_conditions():
    reference = rule_ref(
        {"path": "params.temperature", "min": 0.1, "why": "w", "when": {"path": "params.n_samples", "min": 2}},
        {"path": "params.data_source", "equals": "openai/gsm8k", "why": "w", "when": {"path": "params.data_source", "required": True}},
        {"path": "model.max_tokens", "min": 100, "why": "w",
         "when": [{"path": "params.reasoning", "equals": True}, {"path": "model.name", "matches": "R1"}]},
    )
    assert references.check_rules(reference, job()) == []  # no condition holds: nothing to report
    results = references.check_rules(reference, job(params={"n_samples": 4, "temperature": 0, "data_source": "gsm8k"},
                                                    model={"name": "DeepSeek-R1", "max_tokens": 50}))
    assert [r.path for r in results if not r.ok] == ["params.temperature", "params.data_source", "model.max_tokens"]


def test_rules_of_plugin_references_are_validated_when_checked():
    broken = Reference(name="P", source="plugin", rules=({"path": "params.k", "min": "x", "why": "w"},))
    with pytest.raises(ConfigError, match=r"min must be a number at \$.rules\[0\].min in reference 'P' from plugin"):
        references.check_rules(broken, job())


def test_is_trivial():
    assert references.is_trivial(job())
    assert references.is_trivial(job(benchmark="  "))
    assert not references.is_trivial(job(benchmark="gsm8k"))
    assert references.is_trivial(job(benchmark="gsm8k"), canary=True)


def test_review_job_for_preflight():
    pack = references.builtin_references()
    missing = references.review_job(job(benchmark="my-private-bench"), pack)
    assert missing.reference is None and missing.problems == ()
    assert missing.warnings == ("no benchmark reference for 'my-private-bench': its evaluation pitfalls cannot be checked; "
                                "write one with: runjob reference new my-private-bench",)
    assert references.review_job(job(benchmark="my-private-bench"), pack, canary=True).warnings == ()
    assert references.review_job(job(), pack) == references.Review(None, (), (), ())

    gpqa = references.review_job(job(benchmark="gpqa", params={"shuffle_choices": False}, model={"max_tokens": 4096}), pack)
    assert gpqa.reference.name == "GPQA Diamond"
    assert len(gpqa.problems) == 1 and gpqa.problems[0].startswith("GPQA Diamond reference (runjob-core): params.shuffle_choices is false")
    assert "(why: the dataset stores the correct answer" in gpqa.problems[0]

    # No benchmark, but data.input is a known Hub id: its rules still apply (never a guess from a file name).
    by_input = references.review_job(job(data={"input": "openai/gsm8k"}, params={"num_fewshot": 3}, model={"max_tokens": 1024}), pack)
    assert by_input.reference.name == "GSM8K" and len(by_input.warnings) == 1
    assert references.review_job(job(data={"input": "data/gsm8k.jsonl"}), pack).reference is None
