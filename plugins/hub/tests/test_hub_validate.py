"""validate_results: findings on broken results files, nothing on a clean one; both engines agree."""

from __future__ import annotations

import json

import pytest

from runjob_core.errors import RunjobError
from runjob_hub.validate import Problem, ValidationReport, count_rows, validate_results

def _has_pyarrow():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


ENGINES = ["python"] + (["pyarrow"] if _has_pyarrow() else [])


def labels(report: ValidationReport) -> dict[str, tuple[str, int]]:
    return {p.label: (p.severity, p.count) for p in report.problems}


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def test_clean_file_has_no_problems(tmp_path, h, engine):
    path = h.write_jsonl(tmp_path / "r.jsonl", h.make_rows(300))
    r = validate_results(path, max_tokens=512, score_range=(0, 1), engine=engine)
    assert r.engine == engine
    assert r.ok and r.problems == () and r.rows == 300
    assert r.columns == {"id": "string", "prompt": "string", "response": "string", "finish_reason": "string",
                         "num_output_tokens": "int", "score": "float"}
    assert (r.response_field, r.score_field, r.token_field, r.key) == ("response", "score", "num_output_tokens", "id")
    assert r.token_range == (10, 59)
    assert r.score_range == (0.0, 1.0) and r.score_mean == pytest.approx(200 / 300)
    assert "no problems found" in r.summary()


def test_truncated_rows(tmp_path, h, engine):
    rows = h.make_rows(100)
    for i in (3, 50, 77):
        rows[i].update(finish_reason="length", num_output_tokens=512)
    rows[10]["num_output_tokens"] = 512  # hit the limit, finish_reason says stop
    rows[20]["num_output_tokens"] = 600  # above max_tokens: misconfigured
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), max_tokens=512, engine=engine)
    p = r.problem("truncated")
    assert p.severity == "warning" and p.count == 5
    assert p.examples == ("row 4 (id=q-00003)", "row 11 (id=q-00010)", "row 21 (id=q-00020)")
    assert "finish_reason=length/max_tokens: 3" in p.message and "num_output_tokens >= max_tokens=512: 5" in p.message
    assert r.problem("tokens-over-max").count == 1
    assert r.token_range == (10, 600)
    assert r.ok  # warnings only
    # without max_tokens only finish_reason counts
    r2 = validate_results(tmp_path / "r.jsonl", engine=engine)
    assert r2.problem("truncated").count == 3 and r2.problem("tokens-over-max") is None


def test_mostly_truncated_is_an_error_and_nested_usage_tokens(tmp_path, h, engine):
    rows = [{"id": i, "output": "x " * 10, "finish_reason": "length", "usage": {"completion_tokens": 256},
             "correct": True} for i in range(10)]
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), max_tokens=256, engine=engine)
    assert r.response_field == "output" and r.token_field == "usage.completion_tokens" and r.score_field == "correct"
    assert labels(r)["truncated"] == ("error", 10)
    assert not r.ok
    assert labels(r)["constant-scores"] == ("warning", 10)


def test_cut_mid_sentence_without_finish_reason(tmp_path, h, engine):
    long = "The derivation proceeds by induction on n and we first establish the base case, which "
    rows = [{"id": i, "response": long + ("holds trivially." if i % 2 else "then the inductive"), "score": 1}
            for i in range(20)]
    rows[0]["score"] = 0
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), engine=engine)
    p = r.problem("cut-mid-sentence")
    assert p is not None and p.count == 10 and p.severity == "warning"
    # few cut rows: no warning
    for row in rows[2:]:
        row["response"] = long + "done."
    r = validate_results(h.write_jsonl(tmp_path / "r2.jsonl", rows), engine=engine)
    assert r.problem("cut-mid-sentence") is None


def test_empty_and_missing_fields_and_null_responses(tmp_path, h, engine):
    rows = h.make_rows(40)
    rows[5]["response"] = ""
    rows[6]["response"] = "   \n"
    rows[7]["response"] = None
    del rows[8]["response"]
    rows[9]["prompt"] = ""
    rows[12]["prompt"] = None
    del rows[13]["score"]
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), engine=engine)
    got = labels(r)
    assert got["null-response"] == ("error", 2)
    assert got["empty-response"] == ("warning", 2)
    assert got["empty-field:prompt"] == ("warning", 2)
    assert got["empty-field:score"] == ("warning", 1)
    assert "empty-field:response" not in got
    assert not r.ok
    assert r.problem("null-response").examples == ("row 8 (id=q-00007)", "row 9 (id=q-00008)")
    assert r.problems[0].severity == "error"  # errors first


def test_constant_and_all_zero_and_out_of_range_scores(tmp_path, h, engine):
    r = validate_results(h.write_jsonl(tmp_path / "a.jsonl", h.make_rows(30, score=0.0)), engine=engine)
    assert labels(r)["all-zero-scores"] == ("error", 30) and not r.ok
    r = validate_results(h.write_jsonl(tmp_path / "b.jsonl", h.make_rows(30, score=1)), engine=engine)
    assert labels(r)["constant-scores"] == ("warning", 30) and r.ok
    rows = h.make_rows(30)
    rows[4]["score"] = 7.5
    rows[9]["score"] = -1
    r = validate_results(h.write_jsonl(tmp_path / "c.jsonl", rows), score_range=(0, 1), engine=engine)
    p = r.problem("score-out-of-range")
    assert p.severity == "error" and p.count == 2 and "0..1" in p.message
    assert r.score_range == (-1.0, 7.5)


def test_non_numeric_scores(tmp_path, h, engine):
    rows = h.make_rows(10, score="A")
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), engine=engine)
    assert labels(r)["non-numeric-score"] == ("warning", 10)
    assert r.score_range is None


def test_duplicate_keys(tmp_path, h, engine):
    rows = h.make_rows(50)
    rows[10]["id"] = rows[3]["id"]
    rows[11]["id"] = rows[3]["id"]
    rows[40]["id"] = rows[39]["id"]
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), engine=engine)
    p = r.problem("duplicate-key")
    assert p.severity == "error" and p.count == 3
    assert set(p.examples) == {"id=q-00003", "id=q-00039"}


def test_duplicate_struct_keys_are_counted_by_both_engines(tmp_path, h, engine):
    # Arrow cannot hash a struct column; duplicates must still be found, not assumed away.
    rows = h.make_rows(20)
    for n, row in enumerate(rows):
        row["id"] = {"task": "gsm8k", "n": n}
    rows[7]["id"] = {"task": "gsm8k", "n": 2}
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows), key="id", engine=engine)
    p = r.problem("duplicate-key")
    assert p.count == 1 and p.examples == ('id={"n": 2, "task": "gsm8k"}',)


def test_key_detection(tmp_path, h, engine):
    rows = [{"question_id": i % 5, "response": "ok.", "score": 1.0 * (i % 2)} for i in range(10)]
    path = h.write_jsonl(tmp_path / "r.jsonl", rows)
    r = validate_results(path, engine=engine)
    assert r.key == "question_id" and r.problem("duplicate-key").count == 5
    r = validate_results(path, key="uid", engine=engine)
    assert labels(r)["missing-key-column"] == ("error", 0)
    rows = [{"response": "ok.", "score": 1.0 * (i % 2)} for i in range(10)]
    r = validate_results(h.write_jsonl(tmp_path / "n.jsonl", rows), engine=engine)
    assert labels(r) == {"no-key-column": ("warning", 0)}


def test_explicit_fields(tmp_path, h, engine):
    rows = [{"id": i, "answer_text": "" if i == 0 else "fine.", "grade": 0.5} for i in range(10)]
    path = h.write_jsonl(tmp_path / "r.jsonl", rows)
    r = validate_results(path, response_field="answer_text", score_field="grade", engine=engine)
    assert labels(r)["empty-response"] == ("warning", 1)
    assert labels(r)["constant-scores"][1] == 10
    r = validate_results(path, engine=engine)
    assert "no-response-field" in labels(r) and "no-score-field" in labels(r)
    r = validate_results(path, response_field="nope", engine=engine)
    assert labels(r)["missing-response-field"][0] == "error"


def test_engines_agree(tmp_path, h):
    if len(ENGINES) < 2:
        pytest.skip("pyarrow not installed")
    rows = h.make_rows(500)
    for i in range(0, 500, 7):
        rows[i]["finish_reason"] = "length"
    for i in range(0, 500, 11):
        rows[i]["response"] = ""
    for i in range(0, 500, 13):
        rows[i]["id"] = "dup"
    for i in range(0, 500, 17):
        rows[i]["prompt"] = None
    rows[3]["score"] = 3.0
    path = h.write_jsonl(tmp_path / "r.jsonl", rows)
    a = validate_results(path, max_tokens=40, score_range=(0, 1), engine="python")
    b = validate_results(path, max_tokens=40, score_range=(0, 1), engine="pyarrow")
    strip = lambda r: [(p.label, p.severity, p.count, p.message) for p in r.problems]  # noqa: E731
    assert strip(a) == strip(b)
    assert (a.rows, a.columns, a.token_range, a.score_range) == (b.rows, b.columns, b.token_range, b.score_range)
    assert a.score_mean == pytest.approx(b.score_mean)


def test_malformed_lines_fall_back_to_python(tmp_path, h):
    path = tmp_path / "r.jsonl"
    lines = [json.dumps(r) for r in h.make_rows(5)]
    lines.insert(2, '{"id": "broken", "response": ')
    lines.insert(4, "[1, 2]")
    lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n")
    r = validate_results(path)
    assert r.engine == "python" and r.rows == 5
    p = r.problem("malformed-rows")
    assert p.severity == "error" and p.count == 2 and p.examples == ("line 4", "line 6")


def test_mixed_types_fall_back_and_are_reported(tmp_path, h):
    rows = h.make_rows(6)
    rows[4]["num_output_tokens"] = "many"
    r = validate_results(h.write_jsonl(tmp_path / "r.jsonl", rows))
    assert r.engine == "python" and r.columns["num_output_tokens"] == "mixed(int|string)"


def test_json_array_and_parquet_and_errors(tmp_path, h):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(h.make_rows(12)))
    r = validate_results(path)
    assert r.rows == 12 and r.ok and count_rows(path) == 12
    with pytest.raises(RunjobError, match="not found"):
        validate_results(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = validate_results(empty)
    assert labels(r) == {"no-rows": ("error", 0)} and r.rows == 0
    if _has_pyarrow():
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = h.make_rows(20)
        rows[2]["id"] = rows[1]["id"]
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "r.parquet")
        r = validate_results(tmp_path / "r.parquet")
        assert r.engine == "pyarrow" and r.rows == 20 and labels(r) == {"duplicate-key": ("error", 1)}
        assert count_rows(tmp_path / "r.parquet") == 20


def test_problem_record():
    p = Problem("x", "warning", "m", 1, ["a"])
    assert p.examples == ("a",)
    with pytest.raises(AttributeError):
        p.count = 2  # frozen
