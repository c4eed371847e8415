"""The house's layout goals (issue 25), measured on the import graph of ``runjob_core``
(:mod:`tests._import_graph`: modules are rooms, imports arrows, read with ast)."""

from __future__ import annotations

from pathlib import Path


from tests import _import_graph as graph

ROOT = Path(__file__).resolve().parents[1]
GRAPH = graph.arrows(ROOT, "runjob_core")

#: At most this many modules directly in runjob_core/ (the rest live in wings).
TOP_LEVEL_LIMIT = 24
#: At most this many late imports running back up a floor (each justified where it is).
BACK_UP_LIMIT = 2


def test_the_top_level_holds_at_most_24_modules():
    top = sorted(p.name for p in (ROOT / "runjob_core").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= TOP_LEVEL_LIMIT, top


def test_no_import_circles_inside_runjob_core():
    assert graph.circles(GRAPH) == []


def _back_up_pairs() -> list[str]:
    return sorted({f"{a.source} -> {a.target}" for a in graph.back_up(GRAPH)})


def test_at_most_two_imports_run_back_up_a_floor():
    assert len(_back_up_pairs()) <= BACK_UP_LIMIT, _back_up_pairs()


def test_the_graph_reader_sees_circles_and_back_up_arrows(tmp_path):
    """The helper itself: an eager circle is found, a late import against the layers is counted."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("import pkg.a\n")
    (package / "c.py").write_text("from pkg import a\n")
    (package / "d.py").write_text("def f():\n    from pkg import c\n")
    (package / "e.py").write_text("from pkg import d\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import f\n")
    (package / "f.py").write_text("from . import e\n")
    arrows = graph.arrows(tmp_path, "pkg")
    assert graph.circles(arrows) == [["pkg.a", "pkg.b"]]
    assert [(a.source, a.target) for a in graph.back_up(arrows)] == [("pkg.e", "pkg.f")]
