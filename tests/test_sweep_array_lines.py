"""A sweep's array submit on the terminal: the first elements' lines and one for the rest,
every event still recorded; a JSON event stream keeps every event."""

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
