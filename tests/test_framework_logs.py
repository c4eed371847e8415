"""What runjob reads from real framework output, recorded from the real frameworks
(tests/data/framework_logs: transformers 5.18 Trainer on torch 2.13 CPU, the frameworks
tier's tiny GPT-2; trainer5_stop_file.log is tests/frameworks/jobs/train_tiny.py with
--callback, stopped by the stop file at step 17 of 200)."""

from pathlib import Path

import attrs

from runjob_core.monitor import log_progress as _log_progress
from runjob_core.reporting import logmetrics

LOGS = Path(__file__).parent / "data" / "framework_logs"


def test_transformers_5_string_numbers_are_metrics():
    text = (LOGS / "trainer5_stop_file.log").read_text()
    found = logmetrics.parse(text)
    assert found == [(None, {"loss": 2.048, "grad_norm": 1.533, "learning_rate": 0.000955})]  # the summary is no curve


def test_the_training_bar_gives_the_step_of_a_plain_trainer_script():
    text = (LOGS / "trainer5_stop_file.log").read_text()
    assert _log_progress.step_from_log(text) == (17, 200)  # not Map's 400/400 nor the weights' 28/28
    assert _log_progress.step_from_log("Map: 100%|####| 400/400 [00:00<00:00, 4343.74 examples/s]\n") is None
    # An evaluation bar between training steps does not count as the step.
    text = "\r 40%|####      | 40/100 [00:10<00:15, 4.00it/s]\n\r 50%|#####     | 2/4 [00:00<00:00, 9.1it/s]\n"
    assert _log_progress.step_from_log(text) == (40, 100)


@attrs.define
class _Attempt:
    step: int | None


def test_the_step_only_moves_forward():
    window = "\r  5%|5         | 10/200 [00:03<00:42,  4.52it/s]"
    assert _log_progress.updates(_Attempt(None), window) == {"step": 10}
    assert _log_progress.updates(_Attempt(12), window) == {}


def _scan(name: str):
    from runjob_health._scan import scan_file

    return [hit for hit in scan_file(LOGS / name) if hit.label == "traceback"]


def test_a_failing_torchrun_rank_is_reported_with_its_own_exception():
    # Recorded: torchrun --nproc_per_node 2 tests/frameworks/jobs/fail_rank.py (torch 2.13, gloo).
    # Rank 1 raised; rank 0 then died in all_reduce with "Connection closed by peer".
    hits = _scan("torchrun2_failing_rank.log")
    assert len(hits) == 1 and hits[0].line == 9
    assert "ValueError: bad batch at step 10 on rank 1" in hits[0].message and "closed by peer" not in hits[0].message


def test_a_progress_bar_glued_to_the_traceback_line_is_stripped():
    # The same log with the newline after rank 1's progress bar removed, as a \\r-redrawn tqdm
    # bar leaves it when the traceback follows on the same line.
    hits = _scan("torchrun2_failing_rank_glued.log")
    assert len(hits) == 1 and "ValueError: bad batch at step 10 on rank 1" in hits[0].message


def test_a_chained_exception_is_still_one_traceback_ending_in_the_last():
    text = (b"Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
            b"KeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\n"
            b"Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n"
            b"RuntimeError: lookup failed\n")
    from runjob_health._scan import LogScanner

    scanner = LogScanner()
    hits = scanner.feed(text) + scanner.finish()
    tracebacks = [h for h in hits if h.label == "traceback"]
    assert len(tracebacks) == 1 and "RuntimeError: lookup failed" in tracebacks[0].message


def test_torchrun_workers_that_saved_on_the_stop_file_raise_no_finding():
    # Recorded: torchrun --nproc_per_node 2 train_tiny.py --callback, $RUNJOB_STOP_FILE touched
    # mid-run: both ranks saved checkpoint-12 and exited 75; torchrun raised ChildFailedError
    # (exit 1), which the job script turns back into 75. A "stop" here would refuse the resume.
    assert _scan("torchrun2_saved_on_stop_file.log") == []
    text = (LOGS / "torchrun2_saved_on_stop_file.log").read_text()
    assert text.count("[runjob] saved at step 12 on the time-limit warning") == 2  # both ranks, the same step


def test_two_logged_tracebacks_in_a_row_then_progress_is_not_a_stop():
    # A retry loop that logs each failure (logging.exception) twice in a row, then trains on:
    # the second header must not decide the first as uncaught before the progress is seen.
    from runjob_health import _scan as scan

    traceback = ("Traceback (most recent call last):\n"
                 '  File "train.py", line 10, in fetch\n'
                 "    raise ConnectionError('reset')\n"
                 "ConnectionError: reset\n")
    log = ("step 1 loss 2.0\n" + traceback + traceback
           + "".join(f"step {n} loss 1.{n}\n" for n in range(2, 30))).encode()
    scanner = scan.LogScanner()
    hits = scanner.feed(log) + scanner.finish()
    assert [h.action for h in hits if h.label == "traceback"] == ["continue"], hits
