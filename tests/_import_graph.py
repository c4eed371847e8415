"""The import graph of a package, read with :mod:`ast` (nothing is imported).

Rooms are modules, arrows are imports between them. An arrow is *eager* when it runs at
import time (module level, outside ``if TYPE_CHECKING``) and *late* otherwise (inside a
function, or for type checkers only). Circles are the strongly connected groups of eager
arrows; floors are the layers of the eager graph; a late arrow that points at a module which
(eagerly) depends on its importer runs back up a floor.
"""

from __future__ import annotations

import ast
from pathlib import Path

import attrs


@attrs.frozen
class Arrow:
    source: str
    target: str
    line: int
    eager: bool


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of *package* (a folder under *root*) by dotted name."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """(node, eager) for every import statement of *tree*."""
    def walk(nodes, eager):
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node, eager
            elif isinstance(node, ast.If) and _type_checking(node.test):
                yield from walk(node.body, False)
                yield from walk(node.orelse, eager)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(ast.iter_child_nodes(node), False)
            else:
                yield from walk(ast.iter_child_nodes(node), eager)
    yield from walk(tree.body, True)


def arrows(root: Path, package: str) -> list[Arrow]:
    """Every import inside *package* as an arrow (targets resolved to modules of the package)."""
    names = module_names(root, package)
    out = []
    for source, path in names.items():
        is_package = path.name == "__init__.py"
        for node, eager in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = source.split(".")[: len(source.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in names else base)
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if not target or target == source:
                    continue
                out.append(Arrow(source, target, node.lineno, eager))
                # Importing a.b.c runs a/__init__ and a/b/__init__ first (unless the importer is inside them).
                parent = target.rpartition(".")[0]
                while parent and parent != package:
                    if not (source == parent or source.startswith(parent + ".")):
                        out.append(Arrow(source, parent, node.lineno, eager))
                    parent = parent.rpartition(".")[0]
    return out


def circles(graph: list[Arrow]) -> list[list[str]]:
    """Strongly connected groups (two modules or more) of the eager arrows (Tarjan)."""
    edges: dict[str, set[str]] = {}
    for a in graph:
        if a.eager:
            edges.setdefault(a.source, set()).add(a.target)
            edges.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def back_up(graph: list[Arrow]) -> list[Arrow]:
    """The late arrows whose target depends (through eager arrows) on their source."""
    edges: dict[str, set[str]] = {}
    for a in graph:
        if a.eager:
            edges.setdefault(a.source, set()).add(a.target)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            v = todo.pop()
            if v == goal:
                return True
            if v not in seen:
                seen.add(v)
                todo.extend(edges.get(v, ()))
        return False

    return [a for a in graph if not a.eager and reaches(a.target, a.source)]
