"""A sweep's array submit on the terminal: the first elements' lines and one for the rest,
every event still recorded; a JSON event stream keeps every event. And the ids its elements get."""

from types import SimpleNamespace

from runjob_core.cli._common import event_printer
from runjob_core.store import EventRow
from runjob_core.sweep._array import SHOWN_ELEMENTS, _fewer_lines


def _events(n):
    return [EventRow(i, f"rj-{i}", 1, 0.0, kind, "runjob", f"{kind} {i}", {})
            for kind in ("created", "submitted") for i in range(n)]


def _through(printer, n):
    shown = []
    context = SimpleNamespace(on_event=lambda e: (shown.append(e), printer(e)))
    context.on_event.for_people = getattr(printer, "for_people", False)
    original = context.on_event
    with _fewer_lines(context, n):
        for event in _events(n) + [EventRow(99, "rj-x", 1, 0.0, "finding", "runjob", "kept", {})]:
            context.on_event(event)
    assert context.on_event is original  # given back
    return shown, context


def test_people_see_the_first_elements_and_one_line_for_the_rest(capsys):
    shown, _context = _through(event_printer(False), 1000)
    messages = [e.message for e in shown]
    assert messages[:SHOWN_ELEMENTS] == [f"created {i}" for i in range(SHOWN_ELEMENTS)]
    assert sum(m.startswith("submitted ") for m in messages) == SHOWN_ELEMENTS and "kept" in messages
    assert messages[-1] == f"... {1000 - SHOWN_ELEMENTS} more created and {1000 - SHOWN_ELEMENTS} more submitted " \
                           "(every line: runjob events)"
    assert len(capsys.readouterr().err.splitlines()) == 2 * SHOWN_ELEMENTS + 2


def test_a_json_stream_and_a_small_array_keep_every_line():
    assert len(_through(event_printer(True), 1000)[0]) == 2001
    assert len(_through(event_printer(False), SHOWN_ELEMENTS)[0]) == 2 * SHOWN_ELEMENTS + 1


def test_an_element_whose_new_id_another_process_recorded_gets_another(runjob_home, monkeypatch):
    # Two processes recording big sweeps in the same second can make the same 31-bit id: the
    # second must not die on UNIQUE constraint failed (nor take over the other's job).
    import contextlib

    from runjob_core import lifecycle
    from runjob_core.store import new_job_id
    from runjob_core.sweep import _array, _run, sweep_from_mapping

    context = lifecycle.open_context()
    try:
        theirs = context.store.create_job(name="other", cluster="local", backend="local", spec_json="{}",
                                          spec_hash="h", spec_path=None)
        made = iter([theirs, new_job_id(), theirs, new_job_id(), new_job_id()])
        monkeypatch.setattr(_array, "new_job_id", lambda: next(made))
        sweep = sweep_from_mapping({"name": "ids", "command": "true", "sweep": {"params": {"i": [0, 1, 2]}}},
                                   source="ids.yaml", base_dir=str(runjob_home))
        row = _run.record(context, sweep)
        cluster = lifecycle.cluster_for(context, sweep.jobs[0])
        with contextlib.ExitStack() as held:
            written = _array._record_fresh(context, sweep, row, [0, 1, 2], cluster, None, held)
        ids = {index: job_row.id for index, job_row in written.items()}
        assert theirs not in ids.values() and len(set(ids.values())) == 3
        # The rows handed back as written are the rows the store reads back (the submit renders
        # and writes runjob.json from them instead of reading them again).
        assert written == {i: context.store.get_job(ids[i]) for i in range(3)}
        assert context.store.get_job(theirs).name == "other"  # untouched
        assert [context.store.get_job(ids[i]).sweep_index for i in range(3)] == [0, 1, 2]
        assert all(context.store.latest_attempt(ids[i]).state == "SUBMITTING" for i in range(3))
    finally:
        context.close()
