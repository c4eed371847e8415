"""Plugins import only the core's public surface (listed in docs/plugin-authors.md, "What a
plugin may import"): no module or name whose dotted path has a part starting with ``_``."""

from __future__ import annotations

import ast
import re
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


def _documented_surface() -> set[str]:
    guide = (ROOT / "docs" / "plugin-authors.md").read_text()
    section = guide.split("## What a plugin may import", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"`(runjob_core(?:\.[A-Za-z_]+)*)", section))
    # The package itself and the private modules the section names as off limits are no entries.
    return {n for n in names if "." in n and not any(part.startswith("_") for part in n.split("."))}


def test_every_core_module_a_plugin_imports_is_in_the_guides_list():
    """The guide's list is the whole surface the plugins of this repository use: a new import
    from the core is listed there (or is a mistake)."""
    documented = _documented_surface()
    undocumented = set()
    for path in sorted(ROOT.glob("plugins/*/src/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "runjob_core":
                names = [node.module] if node.module != "runjob_core" else [f"runjob_core.{a.name}" for a in node.names]
                undocumented |= {(str(path.relative_to(ROOT)), n) for n in names
                                 if not any(n == d or n.startswith(d + ".") for d in documented)}
    assert undocumented == set()
