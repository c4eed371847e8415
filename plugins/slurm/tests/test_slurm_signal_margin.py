"""The time-limit warning against the job's own limit (issue 30: a 1-minute limit got its
USR1 after 5 s; a 10-minute canary spent half its time before the warning)."""

from runjob_core.config import job_from_mapping
from runjob_slurm._render import fitted_default_margin, margin_note


def job(**fields):
    raw = {"name": "t", "command": "true", "template": "training", **fields}
    return job_from_mapping(raw, source="t.yaml", base_dir=".")


def test_the_default_margin_is_cut_for_short_limits():
    assert fitted_default_margin(60) == 10
    assert fitted_default_margin(600) == 180  # the warning comes after 6-7 of 10 minutes, not 4-5
    assert fitted_default_margin(7200) == 300 and fitted_default_margin(None) == 300


def test_preflight_says_when_and_why_with_numbers():
    note = margin_note(job(resources={"time": "10"}))
    assert note.summary.startswith("time-limit warning: 180 s before the end of the 600 s limit")
    assert "up to 60 s earlier, so from 360 s into the run" in note.summary
    assert margin_note(job(resources={"time": "2:00:00"})) is None
    assert margin_note(job(resources={"time": "10"}, template="base")) is None


def test_an_explicit_margin_is_kept_but_warned_about():
    note = margin_note(job(resources={"time": "1"}, checkpoint={"signal_margin": 50}))
    assert "signal_margin 50 s with a 60 s limit" in note.summary and "as soon as 0 s into the run" in note.summary
    assert note.suggestions == ("ask for a longer resources.time, or a checkpoint.signal_margin of at most 10 s",)
    assert margin_note(job(resources={"time": "1:00:00"}, checkpoint={"signal_margin": 300})) is None
