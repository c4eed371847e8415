"""The monitor's metrics history: read only when the progress file says the history grew,
from the stored offset, a torn last line left for the next cycle; log metrics only for jobs
that keep no history."""

import json

from runjob_core.reporting import history
from runjob_core.store import Store


class CountingTransport:
    def __init__(self, files):
        self.files, self.reads = files, []

    def read_from(self, path, offset, limit):
        self.reads.append((path, offset))
        return self.files[path][offset: offset + limit]


class Attempt:
    def __init__(self, job_id, n):
        self.job_id, self.n = job_id, n


class Sub:
    progress_path = "/jobs/x/progress.json"


def line(attempt, step, loss):
    return (json.dumps({"attempt": attempt, "t": 100.0 + step, "step": step, "rows_done": None, "m": {"loss": loss}})
            + "\n").encode()


def test_history_is_read_only_when_it_grew_and_from_the_offset(tmp_path):
    store = Store(tmp_path / "state.db")
    job = store.create_job(name="x", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    cursor, attempt = history.HistoryCursor(), Attempt(job, 1)
    data = line(1, 1, 2.0) + line(1, 2, 1.5)
    transport = CountingTransport({"/jobs/x/metrics.jsonl": data + b'{"attempt": 1, "t": 10'})  # a torn last line
    history.observe(cursor, store, transport, attempt, Sub(), {"history_bytes": len(data) + 22}, "")
    assert store.metrics(job) == [(1, "loss", 1.0, 101.0, 2.0), (1, "loss", 2.0, 102.0, 1.5)]
    assert transport.reads == [("/jobs/x/metrics.jsonl", 0)]
    history.observe(cursor, store, transport, attempt, Sub(), {"history_bytes": len(data) + 22}, "{'loss': 9.0}")
    assert transport.reads == [("/jobs/x/metrics.jsonl", 0), ("/jobs/x/metrics.jsonl", len(data))]  # the torn line again
    more = data + line(2, 3, 1.0)  # the next attempt appends to the same file
    transport.files["/jobs/x/metrics.jsonl"] = more
    history.observe(cursor, store, transport, Attempt(job, 2), Sub(), {"history_bytes": len(more)}, "")
    queries = []
    real_offset = store.offset
    store.offset = lambda *a, **k: queries.append(a) or real_offset(*a, **k)
    history.observe(cursor, store, transport, Attempt(job, 2), Sub(), {"history_bytes": len(more)}, "")  # unchanged: no read
    assert len(transport.reads) == 3 and queries == []  # ... and not even a store query
    assert [(a, s) for a, _n, s, _t, _v in store.metrics(job)] == [(1, 1.0), (1, 2.0), (2, 3.0)]
    store.close()


def test_log_lines_give_metrics_only_without_a_history(tmp_path):
    store = Store(tmp_path / "state.db")
    job = store.create_job(name="x", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    cursor, transport = history.HistoryCursor(), CountingTransport({})
    history.observe(cursor, store, transport, Attempt(job, 1), Sub(), {"rows_done": 3}, "{'loss': 2.0, 'epoch': 0.1}\n{'loss': 1.0}\n")
    history.observe(history.HistoryCursor(), store, transport, Attempt(job, 2), Sub(), None, "{'loss': 0.5, 'epoch': 0.3}\n")
    # Numbered on from the last stored step, also by a new monitor process (a fresh cursor).
    assert [(a, s, v) for a, _n, s, _t, v in store.metrics(job)] == [(1, 1.0, 2.0), (1, 2.0, 1.0), (2, 3.0, 0.5)]
    assert transport.reads == []
    store.close()


def test_rows_alone_in_the_history_do_not_hide_log_metrics(tmp_path):
    store = Store(tmp_path / "state.db")
    job = store.create_job(name="x", cluster="local", backend="local", spec_json="{}", spec_hash="h", spec_path=None)
    rows = (json.dumps({"attempt": 1, "t": 5.0, "step": None, "rows_done": 10, "m": {}}) + "\n").encode()
    transport = CountingTransport({"/jobs/x/metrics.jsonl": rows})
    cursor = history.HistoryCursor()
    history.observe(cursor, store, transport, Attempt(job, 1), Sub(), {"history_bytes": len(rows)}, "{'loss': 2.0}\n")
    assert sorted((s, v) for _a, s, _st, _t, v in store.metrics(job)) == [("loss", 2.0), ("rows_done", 10.0)]
    more = rows + line(1, 1, 1.0)  # now the job reports a loss itself: its log is no longer parsed
    transport.files["/jobs/x/metrics.jsonl"] = more
    history.observe(cursor, store, transport, Attempt(job, 1), Sub(), {"history_bytes": len(more)}, "{'loss': 9.0}\n")
    assert 9.0 not in [v for *_rest, v in store.metrics(job)]
    history.observe(history.HistoryCursor(), store, transport, Attempt(job, 1), Sub(), {"history_bytes": len(more)}, "{'loss': 9.0}\n")
    assert 9.0 not in [v for *_rest, v in store.metrics(job)]  # a restarted monitor knows it from the store
    store.close()
