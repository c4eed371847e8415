"""Plugins import only the core's public surface (listed in docs/plugin-authors.md, "What a
plugin may import"): no module or name whose dotted path has a part starting with ``_``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Private imports a plugin still makes, each with its reason; the list only shrinks (empty
#: since the local backend's two went public: ``redact.log_filter``, ``estimator.gpus.gpu_key``).
ALLOWED: set[tuple[str, str]] = set()


def _private_imports() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(ROOT.glob("plugins/*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "runjob_core" and any(p.startswith("_") and p != "__version__" for p in parts):
                    found.add((str(path.relative_to(ROOT)), name))
    return found


def test_plugins_import_only_the_public_surface():
    assert _private_imports() - ALLOWED == set()


def test_the_allow_list_has_no_stale_entries():
    assert ALLOWED - _private_imports() == set()
