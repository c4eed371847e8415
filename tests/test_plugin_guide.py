"""The plugin authors' guide is true: its backend, built as a third-party package and
pip-installed, passes the BackendContract kit as the guide's own test class runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "plugin-authors.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), flags=re.S)


def test_the_guides_backend_installs_and_passes_the_kit(tmp_path):
    backend = next(b for b in _blocks("python") if b.startswith('"""runjob-shell'))
    kit = next(b for b in _blocks("python") if "class TestShellContract(BackendContract)" in b)
    pyproject = next(b for b in _blocks("toml") if 'name = "runjob-shell"' in b)

    package = tmp_path / "runjob-shell"
    (package / "src" / "runjob_shell").mkdir(parents=True)
    (package / "src" / "runjob_shell" / "__init__.py").write_text(backend)
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n' + pyproject
        + '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    (package / "tests").mkdir()
    (package / "tests" / "test_shell_contract.py").write_text(kit)
    (package / "conftest.py").write_text('pytest_plugins = ["runjob_core.testing"]\n')

    # Installed as a user would, into a folder of its own: the suite's environment is untouched.
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site), str(package)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "tests"],
        cwd=package, capture_output=True, text=True, timeout=600, env=env,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\b1[0-9] passed\b", summary) and "failed" not in summary, summary
