"""Finding references: names and aliases, precedence, the project folders and the seed layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from runjob_core import references
from runjob_core.errors import ConfigError
from runjob_core.models import Reference


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def ref(name, source, *aliases, rules=()):
    return Reference(name=name, source=source, aliases=tuple(aliases), rules=tuple(rules))


@pytest.mark.parametrize("query", ["gsm8k", "GSM8K", "GSM-8K", "gsm_8k", " gsm 8k ", "openai/gsm8k", "OpenAI/GSM8K"])
def test_names_and_aliases_match_ignoring_case_dashes_underscores_spaces(query):
    found = references.find_reference(query, [ref("MATH", "p"), ref("GSM8K", "p", "openai/gsm8k")])
    assert found is not None and found.name == "GSM8K"


def test_hub_id_falls_back_to_its_last_part_only_when_nothing_matches_in_full():
    pack = [ref("GSM8K", "runjob-core"), ref("Other", "runjob-core", "someone/gsm8k")]
    assert references.find_reference("someone/gsm8k", pack).name == "Other"
    assert references.find_reference("elsewhere/gsm8k", pack).name == "GSM8K"
    assert references.find_reference("nothing-like-it", pack) is None
    assert references.find_reference("", pack) is None


def test_precedence_project_then_plugin_then_pack():
    pack, plugin, project = ref("GSM8K", "runjob-core"), ref("gsm-8k", "my-plugin"), ref("gsm8k", "project")
    assert references.find_reference("gsm8k", [pack, plugin, project]) is project
    assert references.find_reference("gsm8k", [pack, plugin]) is plugin
    assert references.find_reference("gsm8k", [pack]) is pack
    # An alias in a higher layer beats the name in a lower one.
    alias_only = ref("My GSM variant", "project", "GSM8K")
    assert references.find_reference("gsm8k", [pack, alias_only]) is alias_only
    merged = references.merge_references([pack, plugin, project, ref("MMLU", "runjob-core")])
    assert [(r.name, r.source) for r in merged] == [("gsm8k", "project"), ("MMLU", "runjob-core")]
    hidden = references.shadowing([pack, plugin, project])
    assert hidden[id(pack)] is project and hidden[id(plugin)] is project and id(project) not in hidden


def test_project_references_win_over_the_shipped_pack(tmp_path):
    write(tmp_path / ".runjob/references/gsm8k.md", "---\nname: GSM8K\naliases: [house-gsm]\n---\n# Our GSM8K\n")
    found = references.all_references(tmp_path)
    winner = references.find_reference("gsm8k", found)
    assert winner.source == "project" and winner.path == str(tmp_path / ".runjob/references/gsm8k.md")
    # The pack's GSM8K is hidden, and its aliases now lead to the project's.
    assert references.find_reference("openai/gsm8k", found) is winner
    assert references.find_reference("gsm8k_cot", found) is winner
    assert references.find_reference("house-gsm", found).source == "project"


def test_plugin_references_come_from_the_hook(runjob_pm):
    from runjob_core.context import RunContext
    from runjob_core.store import Store

    plugin_ref = ref("Countdown", "countdown-plugin", "countdown-3to4")

    class Plugin:
        @staticmethod
        def runjob_references(context):
            return [plugin_ref]

    import pluggy

    Plugin.runjob_references = pluggy.HookimplMarker("runjob")(Plugin.runjob_references)
    runjob_pm.register_for_test(Plugin(), name="countdown-plugin")
    store = Store(Path(":memory:"))
    context = RunContext(store=store, pm=runjob_pm, clusters={}, state_dir=Path("."))
    try:
        found = references.plugin_references(context)
    finally:
        store.close()
    assert plugin_ref in found
    assert references.find_reference("countdown 3to4", references.all_references(Path("/nonexistent"), found)) is plugin_ref


SEED_MAP = """\
# Datasets and Tasks Reference

| Benchmark | File | Tags | Description |
|-----------|------|------|-------------|
| Countdown | [countdown.md](countdown.md) | math, reasoning, rl-reward | Reach target number using arithmetic operations |
| GSM8K | [gsm8k.md](gsm8k.md) | math, reasoning, few-shot | Grade school math word problems, 8.5K examples |
| Missing | [missing.md](missing.md) | - | listed, but the file does not exist |
"""


def test_seed_layout_with_a_table_index(tmp_path):
    folder = tmp_path / ".claude/references/datasets_and_tasks"
    write(folder / "datasets_and_tasks_map.md", SEED_MAP)
    write(folder / "countdown.md", "# Countdown\n\n## Evaluation\nCheck the equation, not the string.\n")
    write(folder / "gsm8k.md", "---\nname: GSM8K (house)\nrules:\n  - {path: params.num_fewshot, equals: 8, why: house rule}\n---\nbody\n")
    write(folder / "unlisted.md", "# Unlisted Task\ntext\n")
    found = references.project_references(tmp_path)
    by_name = {r.name: r for r in found}
    assert set(by_name) == {"Countdown", "GSM8K (house)", "Unlisted Task"}
    countdown = by_name["Countdown"]
    assert countdown.source == "project" and countdown.rules == () and "Check the equation" in countdown.body
    house = by_name["GSM8K (house)"]
    assert "GSM8K" in house.aliases and house.rules[0]["equals"] == 8  # the index name becomes an alias
    assert references.find_reference("gsm8k", [*found, *references.builtin_references()]) is house
    assert "unlisted" in by_name["Unlisted Task"].aliases  # the file name, as an alias


def test_dotrunjob_wins_over_the_seed_layout(tmp_path):
    write(tmp_path / ".claude/references/datasets_and_tasks/datasets_and_tasks_map.md", SEED_MAP)
    write(tmp_path / ".claude/references/datasets_and_tasks/countdown.md", "# Countdown\n")
    write(tmp_path / ".runjob/references/countdown.md", "---\nname: Countdown\n---\n")
    found = references.project_references(tmp_path)
    assert references.find_reference("countdown", found).path.endswith(".runjob/references/countdown.md")


def test_index_formats():
    text = """\
Intro paragraph with a [link](https://example.org/x.md) that is not an entry.

| Name | Aliases | Reference |
|:-----|:-------:|----------:|
| **SWE-bench Verified** | swebench-verified; `princeton-nlp/SWE-bench_Verified` | `swe-bench-verified.md` |
| Bare | - | bare |

- [AIME](aime.md) (aliases: aime24, aime 2025)
- HumanEval: humaneval.md
* MBPP | mbpp-plus, sanitized | mbpp.md
1. [countdown.md](countdown.md) — Countdown
- just a note, no file
"""
    entries = references.parse_index(text)
    assert entries == [
        references.IndexEntry("SWE-bench Verified", "swe-bench-verified.md", ("swebench-verified", "princeton-nlp/SWE-bench_Verified")),
        references.IndexEntry("Bare", "bare.md", ()),
        references.IndexEntry("AIME", "aime.md", ("aime24", "aime 2025")),
        references.IndexEntry("HumanEval", "humaneval.md", ()),
        references.IndexEntry("MBPP", "mbpp.md", ("mbpp-plus", "sanitized")),
        references.IndexEntry("Countdown", "countdown.md", ()),
    ]


def test_a_file_without_front_matter_or_heading_is_named_by_its_file(tmp_path):
    path = write(tmp_path / "my-task.md", "Just notes.\n")
    loaded = references.load_reference_file(path)
    assert loaded.name == "my-task" and loaded.rules == () and loaded.body == "Just notes.\n"


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        references.load_reference_file(tmp_path / "nope.md")
