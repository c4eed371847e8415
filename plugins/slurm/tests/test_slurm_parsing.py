"""_parse against output recorded on a real SLURM 22.05 cluster (tests/data/README.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runjob_slurm import _parse as P

DATA = Path(__file__).parent / "data"


def fixture(name: str) -> str:
    return (DATA / name).read_text()


# ----------------------------------------------------------------------------- argv


def test_squeue_argv():
    assert P.squeue_argv("rjuser") == ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-r", "-u", "rjuser", "-t", "all",
                                       "-o", "%i|%A|%T|%r|%S|%e|%M|%N|%P|%k|%j"]


def test_squeue_poll_argv_asks_for_few_jobs_by_id_and_many_by_user():
    head = ["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-r", "-u", "rjuser"]
    tail = ["-o", "%i|%A|%T|%r|%S|%e|%M|%N|%P||"]
    assert P.squeue_poll_argv("rjuser") == head + tail
    assert P.squeue_poll_argv("rjuser", ["7", "8_1", "7"]) == head + ["-j", "7,8_1"] + tail
    assert P.squeue_poll_argv("rjuser", ["7"]) == head + ["-j", "7,7"] + tail  # one id alone fails once it left
    assert P.squeue_poll_argv("rjuser", ["7", "7+1"]) == head + tail  # one id squeue could not parse: all, by user
    many = [str(i) for i in range(P.FEW_JOBS + 1)]
    assert P.squeue_poll_argv("rjuser", many) == head + tail


def test_sacct_argv_chunks_long_id_lists():
    ids = [str(i) for i in range(1000, 1450)]
    calls = P.sacct_argv(ids)
    assert len(calls) == 3
    chunks = [call[-1].split(",") for call in calls]
    assert [len(c) for c in chunks] == [200, 200, 50]
    assert sum(chunks, []) == ids
    assert calls[0][:-1] == ["env", "SLURM_TIME_FORMAT=%s", "sacct", "-n", "-X", "-P", "-o",
                             "JobID,JobIDRaw,State,ExitCode,Reason,Start,End,NodeList,Elapsed", "-j"]


def test_sacct_argv_small_and_empty():
    assert len(P.sacct_argv(["1", "2", "1"])) == 1
    assert P.sacct_argv(["1", "2", "1"])[0][-1] == "1,2"
    assert P.sacct_argv([]) == []
    assert len(P.sacct_argv([str(i) for i in range(200)])) == 1
    assert len(P.sacct_argv([str(i) for i in range(201)])) == 2


def test_sacct_steps_argv_has_no_dash_x():
    argv = P.sacct_steps_argv("11")
    assert "-X" not in argv and argv[-2:] == ["-j", "11"]


def test_partitions_argv():
    assert P.partitions_argv() == ["env", "SLURM_TIME_FORMAT=%s", "sinfo", "-h", "-o", "%P|%a|%l|%c|%m|%G"]


# ----------------------------------------------------------------------------- squeue


def test_parse_squeue_mixed():
    rows = P.parse_squeue(fixture("squeue_mixed.txt"))
    assert len(rows) == len(fixture("squeue_mixed.txt").splitlines())
    pending = {job_id: rows[job_id].reason for job_id in ("19", "20", "21", "23", "24", "26", "27", "28", "29", "33", "34")}
    assert pending == {"19": "PartitionDown", "20": "BeginTime", "21": "JobHeldUser", "23": "QOSMaxJobsPerUserLimit",
                       "24": "DependencyNeverSatisfied", "26": "PartitionTimeLimit", "27": "PartitionConfig",
                       "28": "PartitionNodeLimit", "29": "JobHeldAdmin", "33": "Resources", "34": "Priority"}
    assert all(rows[i].state == "PENDING" for i in pending)
    assert rows["35"].reason == "job requeued in held state"
    assert rows["37"].state == "COMPLETING" and rows["36"].state == "SUSPENDED"
    gpu = rows["32"]
    assert (gpu.state, gpu.nodes, gpu.partition, gpu.reason) == ("RUNNING", "gpu01", "gpu", None)
    assert gpu.start == 1796230838.0 and gpu.elapsed == 7
    assert rows["19"].start is None and rows["19"].nodes is None and rows["19"].comment is None
    assert rows["20"].end is None  # "NONE"
    assert rows["31"].comment == "runjob:7f3a9c" and rows["31"].name == "rec-tagged"
    assert rows["5"].elapsed == 71 and rows["5"].state == "TIMEOUT"


def test_parse_squeue_array_and_text_ids():
    rows = P.parse_squeue(fixture("squeue_mixed.txt"))
    assert rows["14_0"].raw_id == "17" and rows["14_2"].raw_id == "14"
    assert rows["30_[0-3]"].state == "PENDING"


def test_pipe_in_name_keeps_every_field():
    rows = P.parse_squeue(fixture("squeue_pipes.txt"))
    train = rows["54"]
    assert (train.state, train.reason, train.partition, train.comment) == ("PENDING", "JobHeldUser", "debug", "runjob:4be1d2")
    assert train.name == "train|lr=0.1|bs=32"
    assert P.find_by_comment(rows, "runjob:4be1d2") == "54"


def test_pipe_in_comment_keeps_the_fixed_fields():
    rows = P.parse_squeue(fixture("squeue_pipes.txt") + fixture("squeue_mixed.txt"))
    # A comment with '|' (not runjob's) spills into the name; id, state and times stay right.
    assert (rows["55"].state, rows["55"].reason, rows["55"].partition) == ("PENDING", "JobHeldUser", "debug")
    assert rows["55"].comment == "note" and rows["55"].name == "with|pipes|plain"
    assert (rows["6"].state, rows["6"].start, rows["6"].nodes) == ("TIMEOUT", 1796230752.0, "cpu01")
    assert rows["21"].reason == "JobHeldUser"


def test_parse_squeue_skips_garbage():
    assert P.parse_squeue("") == {}
    assert P.parse_squeue("slurm_load_jobs error: Unable to contact slurm controller\n") == {}


# ----------------------------------------------------------------------------- sacct

SACCT_EXPECTED = {  # id: (state, exit code, signal)
    "5": ("TIMEOUT", 0, None),
    "7": ("COMPLETED", 0, None),
    "8": ("FAILED", 3, None),
    "9": ("FAILED", 0, 11),
    "10": ("OUT_OF_MEMORY", 0, 125),
    "11": ("FAILED", 1, None),
    "12": ("CANCELLED", 0, None),
    "13": ("CANCELLED", 0, None),
    "14_0": ("COMPLETED", 0, None),
    "15": ("COMPLETED", 0, None),
    "16": ("FAILED", 1, None),  # DEADLINE
    "38": ("NODE_FAIL", 0, None),
    "50+1": ("CANCELLED", 0, None),
}


@pytest.mark.parametrize("job_id", sorted(SACCT_EXPECTED))
def test_parse_sacct_states(job_id):
    rows = P.parse_sacct(fixture("sacct_states.txt"))
    row = rows[job_id]
    state, code, signal, _ = P.map_state(row.state, row.exit_code, row.reason)
    assert (state, code, signal) == SACCT_EXPECTED[job_id]


def test_parse_sacct_fields():
    rows = P.parse_sacct(fixture("sacct_states.txt"))
    assert rows["12"].state == "CANCELLED by 1001"
    assert P.map_state(rows["12"].state, rows["12"].exit_code, rows["12"].reason)[3] == "cancelled by uid 1001"
    assert rows["13"].start is None and rows["13"].nodes is None  # "None", "None assigned"
    assert rows["14_1"].raw_id == "18" and rows["50+1"].raw_id == "51"
    assert rows["5"].elapsed == 71 and rows["5"].end == 1796230823.0
    assert P.map_state(rows["16"].state, rows["16"].exit_code, rows["16"].reason)[3].startswith("DEADLINE")


def test_parse_sacct_live_rows():
    rows = P.parse_sacct(fixture("sacct_live.txt"))
    assert P.map_state(rows["39"].state, rows["39"].exit_code, rows["39"].reason)[:3] == ("RUNNING", None, None)
    assert rows["39"].end is None  # "Unknown"
    assert P.map_state(rows["19"].state, rows["19"].exit_code, rows["19"].reason) == ("PENDING", None, None, "PartitionDown")


def test_requeue_history_keeps_latest_run():
    text = fixture("sacct_requeue_history.txt")
    assert "REQUEUED" in text and "NODE_FAIL" in text
    rows = P.parse_sacct(text)
    assert rows["15"].state == "COMPLETED" and rows["39"].state == "CANCELLED by 1001"


def test_oom_inside_srun_step():
    rows = P.parse_sacct(fixture("sacct_steps_srun_oom.txt"))
    assert set(rows) == {"11", "11.batch", "11.0"}
    assert P.oom_steps(rows, "11") == ["11.0"]
    info = P.merge(["11"], {}, rows)["11"]
    assert info.state == "OUT_OF_MEMORY" and "11.0" in info.reason and info.exit_code == 1


def test_batch_oom_step():
    rows = P.parse_sacct(fixture("sacct_steps_batch_oom.txt"))
    assert P.merge(["10"], {}, rows)["10"].state == "OUT_OF_MEMORY"


def test_cancelled_after_an_oom_killed_step_is_out_of_memory():
    rows = P.parse_sacct(fixture("sacct_steps_cancelled_after_oom.txt"))
    assert rows["491"].state == "CANCELLED by 0"
    info = P.merge(["491"], {}, rows)["491"]
    assert info.state == "OUT_OF_MEMORY" and info.reason == "step 491.batch ran out of memory; the job was cancelled afterwards"
    plain = {"491": rows["491"]}  # without the steps it stays CANCELLED
    assert P.merge(["491"], {}, plain)["491"].state == "CANCELLED"


# ----------------------------------------------------------------------------- map_state

STATE_TABLE = [
    # raw state, exit field, reason -> state, exit code, signal
    ("PENDING", "0:0", "Priority", "PENDING", None, None),
    ("RUNNING", "0:0", "None", "RUNNING", None, None),
    ("CONFIGURING", "", None, "RUNNING", None, None),
    ("COMPLETING", "", None, "RUNNING", None, None),
    ("SUSPENDED", "", None, "RUNNING", None, None),
    ("STOPPED", "", None, "RUNNING", None, None),
    ("COMPLETED", "0:0", "None", "COMPLETED", 0, None),
    ("FAILED", "3:0", "NonZeroExitCode", "FAILED", 3, None),
    ("FAILED", "0:9", "None", "FAILED", 0, 9),
    ("CANCELLED by 1001", "0:0", "None", "CANCELLED", 0, None),
    ("CANCELLED", "0:15", None, "CANCELLED", 0, 15),
    ("CANCELLED+", "0:15", None, "CANCELLED", 0, 15),
    ("TIMEOUT", "0:0", "TimeLimit", "TIMEOUT", 0, None),
    ("OUT_OF_MEMORY", "0:125", "OutOfMemory", "OUT_OF_MEMORY", 0, 125),
    ("PREEMPTED", "0:0", None, "PREEMPTED", 0, None),
    ("NODE_FAIL", "0:0", "NodeDown", "NODE_FAIL", 0, None),
    ("REQUEUED", "0:0", None, "REQUEUED", None, None),
    ("REQUEUE_HOLD", "0:0", None, "REQUEUED", None, None),
    ("REQUEUE_FED", "0:0", None, "REQUEUED", None, None),
    ("RESIZING", "0:0", None, "REQUEUED", None, None),
    ("BOOT_FAIL", "0:0", None, "FAILED", 0, None),
    ("DEADLINE", "1:0", "DeadLine", "FAILED", 1, None),
    ("SPECIAL_EXIT", "0:0", None, "FAILED", 0, None),
    ("REVOKED", "0:0", None, "CANCELLED", 0, None),
]


@pytest.mark.parametrize("raw,exit_field,reason,state,code,signal", STATE_TABLE)
def test_map_state_table(raw, exit_field, reason, state, code, signal):
    assert P.map_state(raw, exit_field, reason)[:3] == (state, code, signal)


def test_map_state_reasons():
    assert P.map_state("PENDING", "", "PartitionDown")[3] == "PartitionDown"
    assert P.map_state("PENDING", "", "None")[3] is None
    assert P.map_state("COMPLETED", "0:0", "BeginTime")[3] is None  # stale reason of a requeued job
    assert P.map_state("FAILED", "0:0", "BeginTime")[3] is None
    assert P.map_state("FAILED", "3:0", "NonZeroExitCode")[3] == "NonZeroExitCode"
    for raw in ("BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED", "CONFIGURING", "COMPLETING", "SUSPENDED"):
        assert raw in P.map_state(raw, "0:0", None)[3]
    assert P.map_state("WEIRD_NEW", "0:0", None)[0] == "RUNNING"  # keep polling


# ----------------------------------------------------------------------------- merge


def test_merge_lost_and_sources():
    queued = P.parse_squeue(fixture("squeue_mixed.txt"))
    accounted = P.parse_sacct(fixture("sacct_states.txt"))
    merged = P.merge(["19", "31", "37", "8", "999999"], queued, accounted)
    assert merged["999999"].state == "LOST"
    assert merged["8"].exit_code == 3  # squeue FAILED, sacct has the code
    assert merged["19"].state == "CANCELLED"  # sacct (asked later) says finished
    merged = P.merge(["19", "31", "37", "36", "8", "13"], queued, {})
    assert merged["19"] == P.JobInfo("PENDING", "PartitionDown", None, None, None, None, None)
    assert merged["31"].state == "RUNNING" and merged["31"].node == "cpu01" and merged["31"].ended is None
    assert merged["37"].state == "RUNNING" and "COMPLETING" in merged["37"].reason
    assert merged["36"].state == "RUNNING"
    assert merged["8"].state == "FAILED" and merged["8"].exit_code is None  # no sacct: no exit code
    assert merged["13"].state == "CANCELLED"


def test_merge_prefers_squeue_while_alive():
    queued = P.parse_squeue(fixture("squeue_mixed.txt"))
    live = P.parse_sacct(fixture("sacct_live.txt"))  # sacct's reason for 26 is stale (PartitionConfig)
    assert P.merge(["26"], queued, live)["26"].reason == "PartitionTimeLimit"


def test_merge_waits_for_sacct_to_catch_up():
    queued = P.parse_squeue("8|8|FAILED|NonZeroExitCode|1796230793|1796230794|0:01|cpu01|debug|(null)|x\n")
    lagging = P.parse_sacct("8|8|RUNNING|0:0|None|1796230793|Unknown|cpu01|00:00:01\n")
    info = P.merge(["8"], queued, lagging)["8"]
    assert info.state == "RUNNING" and "sacct" in info.reason


def test_merge_returns_tuples():
    info = P.merge(["7"], {}, P.parse_sacct(fixture("sacct_states.txt")))["7"]
    state, reason, exit_code, signal, started, ended, node = info
    assert (state, exit_code, node) == ("COMPLETED", 0, "cpu01") and started <= ended


def test_needs_sacct():
    queued = P.parse_squeue(fixture("squeue_mixed.txt"))
    assert P.needs_sacct(["19", "31", "37", "8", "5", "999"], queued) == ["8", "5", "999"]


# ----------------------------------------------------------------------------- small parsers


def test_parse_sbatch_parsable():
    assert P.parse_sbatch_parsable(fixture("sbatch_parsable_stdout.txt")) == "52"
    assert P.parse_sbatch_parsable(fixture("sbatch_parsable_cluster_stdout.txt")) == "53"
    assert P.parse_sbatch_parsable("12345;della\n") == "12345"
    with pytest.raises(ValueError):
        P.parse_sbatch_parsable("")


def test_find_by_comment():
    rows = P.parse_squeue(fixture("squeue_mixed.txt"))
    assert P.find_by_comment(rows, "runjob:7f3a9c") == "31"
    assert P.find_by_comment(rows, "rj-tag-admin") == "29"
    assert P.find_by_comment(rows, "runjob:nope") is None
    both = P.parse_squeue("40|40|FAILED|None|1|2|0:01|cpu01|debug|t1|a\n"
                          "41|41|RUNNING|None|3|N/A|0:01|cpu01|debug|t1|a\n"
                          "39|39|PENDING|Priority|N/A|N/A|0:00||debug|t1|a\n")
    assert P.find_by_comment(both, "t1") == "41"  # the newest live one


def test_parse_partitions():
    parts = {p.name: p for p in P.parse_partitions(fixture("sinfo_partitions.txt"))}
    assert list(parts) == ["debug", "gpu", "maint"]
    assert parts["debug"].default and parts["debug"].max_time is None and parts["debug"].gres == ()
    assert (parts["gpu"].max_time, parts["gpu"].cpus, parts["gpu"].mem_mb, parts["gpu"].gres) == (3600, 8, 4000, ("gpu:h100:2",))
    assert parts["maint"].state == "down" and parts["maint"].cpus == 32 and parts["maint"].gres == ("gpu:h100:2",)


@pytest.mark.parametrize("text,seconds", [
    ("0:00", 0), ("1:11", 71), ("00:01:11", 71), ("1:00:00", 3600), ("2-00:00:00", 172800), ("1-02", 93600),
    ("1-02:30", 95400), ("30", 1800), ("infinite", None), ("UNLIMITED", None), ("", None), ("abc", None),
])
def test_parse_duration(text, seconds):
    assert P.parse_duration(text) == seconds


def test_parse_time():
    assert P.parse_time("1796230752") == 1796230752.0
    for empty in ("Unknown", "None", "N/A", "NONE", ""):
        assert P.parse_time(empty) is None
    assert P.parse_time("2026-12-02T16:59:12") == time.mktime((2026, 12, 2, 16, 59, 12, 0, 0, -1))


def test_parse_exit_code():
    assert P.parse_exit_code("3:0") == (3, None)
    assert P.parse_exit_code("0:11") == (0, 11)
    assert P.parse_exit_code("") == (None, None)


def test_max_rss_field_takes_the_largest_step():
    text = "812|\n812.batch|2048K\n812.extern|1024K\n812.0|1.50G\n"
    assert P.max_rss_field(text) == "1.50G"
    assert P.max_rss_field("813|\n813.batch|\n") is None
    assert P.sacct_maxrss_argv("812") == ["sacct", "-n", "-P", "-o", "JobID,MaxRSS", "-j", "812"]


# ----------------------------------------------------------------------------- the job's own ending


def test_a_job_that_exited_0_after_its_limit_is_completed():
    # Recorded: the batch script trapped SLURM's SIGTERM at the limit and exited 0.
    rows = P.parse_sacct(fixture("sacct_steps_timeout_exit0.txt"))
    assert rows["117"].state == "TIMEOUT" and rows["117.batch"].state == "COMPLETED"
    info = P.merge(["117"], {}, rows)["117"]
    assert (info.state, info.exit_code, info.signal) == ("COMPLETED", 0, None)
    assert "exited 0" in info.reason
    # Without its steps (sacct -X) the scheduler's word is all there is.
    assert P.merge(["117"], {}, {"117": rows["117"]})["117"].state == "TIMEOUT"


def test_a_job_that_saved_with_75_after_its_limit_is_a_save():
    rows = P.parse_sacct(fixture("sacct_steps_timeout_exit75.txt"))
    info = P.merge(["123"], {}, rows)["123"]
    assert (info.state, info.exit_code) == ("FAILED", 75) and "saved" in info.reason


def test_a_batch_step_killed_at_the_limit_stays_timeout():
    rows = P.parse_sacct("40|40|TIMEOUT|0:0|None|1|61|cpu01|00:01:01\n"
                         "40.batch|40.batch|CANCELLED|0:15||1|61|cpu01|00:01:01\n")
    assert P.merge(["40"], {}, rows)["40"].state == "TIMEOUT"


def test_find_array_task_by_the_array_script_and_task():
    text = ("70_0|grid|sbatch --parsable --chdir /s/a /s/a/array-1.sh\n"
            "70_1|grid|sbatch --parsable --chdir /s/a /s/a/array-1.sh\n"
            "71|other|sbatch --parsable --chdir /s/b /s/b/run.sh\n"
            "90_1|grid|sbatch --parsable --chdir /s/a /s/a/array-1.sh\n")
    assert P.find_array_task(text, "/s/a/array-1.sh", 1) == "90_1"  # the newest array
    assert P.find_array_task(text, "/s/a/array-1.sh", 0) == "70_0"
    assert P.find_array_task(text, "/s/a/array-1.sh", 5) is None
    assert P.find_array_task(text, "/s/b/run.sh", 0) is None
