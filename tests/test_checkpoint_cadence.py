"""checkpoint.every against what the job reports (issue 30: '200 steps' was accepted and never
checked; a manual resume got checkpoint_late 1 s in, on the previous attempt's clock; 30 s
was printed as '0 min')."""

import time

from runjob_core.config import job_from_mapping
from runjob_health._monitor import _checkpoint_late, _Watch


def watch(every):
    job = job_from_mapping({"name": "t", "command": "true", "template": "training", "checkpoint": {"every": every}},
                           source="t.yaml", base_dir=".")
    return _Watch(job)


def test_every_n_steps_is_checked_against_the_steps_seen():
    w = watch("200 steps")
    assert _checkpoint_late(w, {"step": 250, "metrics": {"last_checkpoint_step": 200}}, time.time()) == []
    late = _checkpoint_late(w, {"step": 520, "metrics": {"last_checkpoint_step": 200}}, time.time())
    assert [f.label for f in late] == ["checkpoint_late"]
    assert late[0].message.startswith("no checkpoint for 320 steps since the checkpoint at step 200, now at step 520")
    assert _checkpoint_late(w, {"step": 530, "metrics": {"last_checkpoint_step": 200}}, time.time()) == []  # once


def test_a_resume_counts_steps_from_where_it_started():
    w = watch("200 steps")
    assert _checkpoint_late(w, {"step": 1000}, time.time()) == []  # resumed at step 1000: none saved yet
    assert [f.label for f in _checkpoint_late(w, {"step": 1301}, time.time())] == ["checkpoint_late"]


def test_an_earlier_attempts_checkpoint_does_not_start_this_attempts_clock():
    w = watch("20s")
    previous = time.time() - 3600  # the progress file still holds attempt 1's last checkpoint
    assert _checkpoint_late(w, {"metrics": {"last_checkpoint_at": previous}}, w.started + 1) == []
    late = _checkpoint_late(w, {"metrics": {"last_checkpoint_at": previous}}, w.started + 31)
    assert "no checkpoint for 31 s (checkpoint.every is 20 s)" in late[0].message
