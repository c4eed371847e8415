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


def test_no_core_module_keeps_state_in_the_plugins_scratchpad():
    """``context.scratchpad`` is the plugins' scratch space: the core keeps its state in typed
    attributes (``context.core_memory``, the :class:`~runjob_core.monitor.Monitor`). Only
    context.py defines it; hookspecs.py may document it for plugin authors (in docstrings)."""
    import io
    import tokenize

    offenders = []
    for path in sorted((ROOT / "runjob_core").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name == "runjob_core/context.py":
            continue
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if "scratchpad" not in token.string:
                continue
            if name == "runjob_core/hookspecs.py" and token.type == tokenize.STRING:
                continue  # the plugin authors' documentation of it
            offenders.append(f"{name}:{token.start[0]}")
    assert offenders == []


#: Calls that make a mutable container (a module-level one is state shared by every caller).
_MUTABLE_MAKERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "WeakKeyDictionary",
                   "WeakValueDictionary", "WeakSet", "Condition", "Lock", "RLock", "Event"}


def _module_state(tree) -> list[tuple[int, str]]:
    """Module-level bindings to mutable containers (``__all__`` aside), and ``global``
    statements anywhere. A constant table is written read-only (a tuple, a frozenset, a
    ``types.MappingProxyType``)."""
    import ast

    found = []
    for node in tree.body:
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        mutable = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp)
        if isinstance(value, ast.Call):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            mutable = called in _MUTABLE_MAKERS
        if mutable:
            found += [(node.lineno, ast.unparse(t)) for t in targets if not ast.unparse(t).startswith("__")]
    found += [(node.lineno, "global " + ", ".join(node.names)) for node in ast.walk(tree) if isinstance(node, ast.Global)]
    return found


def test_the_monitor_keeps_no_state_in_module_globals():
    """What lasts between cycles belongs to the Monitor (or the context), never to a module:
    two monitors in one process (two contexts, the API beside the CLI) must not share it."""
    import ast

    offenders = [f"{path.relative_to(ROOT).as_posix()}:{line}: {what}"
                 for path in sorted((ROOT / "runjob_core" / "monitor").rglob("*.py"))
                 for line, what in _module_state(ast.parse(path.read_text()))]
    assert offenders == []


def test_the_module_state_finder_sees_globals():
    """The finder itself: a module dict, a registry made by a call and a ``global`` are found;
    constants are not."""
    import ast

    source = ("import weakref\nLIMIT = 3\nNAMES = frozenset({'a'})\n_HUBS = weakref.WeakKeyDictionary()\n"
              "_seen: dict = {}\n__all__ = ['f']\ndef f():\n    global LIMIT\n    LIMIT = 4\n")
    assert _module_state(ast.parse(source)) == [(4, "_HUBS"), (5, "_seen"), (8, "global LIMIT")]
