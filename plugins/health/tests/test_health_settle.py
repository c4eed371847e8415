"""settle(): a traceback followed by silence is decided without waiting for more lines."""

from runjob_health._scan import LogScanner

OOM = (b"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    step()\n"
       b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")


def test_pending_traceback_is_held_then_settled():
    scanner = LogScanner()
    assert scanner.feed(OOM) == []
    [hit] = scanner.settle()
    assert (hit.label, hit.severity, hit.action, hit.line) == ("cuda_oom", "error", "stop", 4)
    assert scanner.settle() == [] and scanner.finish() == []


def test_settle_before_the_exception_line_waits():
    scanner = LogScanner()
    scanner.feed(OOM.split(b"torch.")[0])
    assert scanner.settle() == []
    [hit] = scanner.feed(b"torch.OutOfMemoryError: CUDA out of memory.\n") + scanner.finish()
    assert hit.label == "cuda_oom"
