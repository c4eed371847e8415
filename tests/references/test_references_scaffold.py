"""runjob reference new: the scaffold loads, is found, and is never overwritten."""

from __future__ import annotations

import pytest

from runjob_core import references
from runjob_core.errors import RunjobError


def test_scaffold_then_load(tmp_path):
    path = references.scaffold("SWE-bench Verified", tmp_path)
    assert path == tmp_path / ".runjob" / "references" / "swe-bench-verified.md"
    loaded = references.load_reference_file(path)
    assert loaded.name == "SWE-bench Verified" and loaded.source == "project" and loaded.rules == ()
    for section in references.SECTIONS:
        assert f"## {section}" in loaded.body
    meta = references.reference_metadata(loaded)
    assert meta["sources"] == () and meta["num_fewshot"] is None
    assert references.find_reference("swe bench verified", references.project_references(tmp_path)) == loaded


def test_scaffold_quotes_awkward_names(tmp_path):
    path = references.scaffold("Odd: name # with [yaml] chars", tmp_path)
    assert references.load_reference_file(path).name == "Odd: name # with [yaml] chars"


def test_the_commented_example_rules_are_valid_once_uncommented(tmp_path):
    text = references.scaffold("X", tmp_path).read_text()
    example = "\n".join(line.replace("#  ", "  ", 1) for line in text.splitlines() if line.startswith("#  "))
    text = text.replace("rules: []\n", "rules:\n" + example + "\n", 1)
    rules = references.parse_reference(text, label="x.md").rules
    assert [r["path"] for r in rules] == ["params.num_fewshot", "model.max_tokens"]


def test_scaffold_refuses_to_overwrite(tmp_path):
    path = references.scaffold("GSM8K", tmp_path)
    path.write_text("my edits")
    with pytest.raises(RunjobError, match="already exists"):
        references.scaffold("gsm8k", tmp_path)
    assert path.read_text() == "my edits"


def test_scaffold_needs_a_usable_name(tmp_path):
    with pytest.raises(RunjobError, match="cannot make a file name"):
        references.scaffold("???", tmp_path)
