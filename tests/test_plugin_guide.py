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


def write_example_package(package: Path) -> Path:
    """The guide's backend as the third-party package its reader would make (also used by
    scripts/build-release.sh, which installs it against the built wheels)."""
    backend = next(b for b in _blocks("python") if b.startswith('"""runjob-shell'))
    kit = next(b for b in _blocks("python") if "class TestShellContract(BackendContract)" in b)
    pyproject = next(b for b in _blocks("toml") if 'name = "runjob-shell"' in b)
    (package / "src" / "runjob_shell").mkdir(parents=True)
    (package / "src" / "runjob_shell" / "__init__.py").write_text(backend)
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n' + pyproject
        + '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    (package / "tests").mkdir()
    (package / "tests" / "test_shell_contract.py").write_text(kit)
    (package / "conftest.py").write_text('pytest_plugins = ["runjob_core.testing"]\n')
    return package


def test_the_guides_backend_installs_and_passes_the_kit(tmp_path):
    package = write_example_package(tmp_path / "runjob-shell")

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


def test_every_python_snippet_of_the_guide_imports_what_it_uses_and_runs(tmp_path):
    """Each snippet, copied alone into a module of its own, imports and its hooks answer
    through a real plugin manager (the backend and the kit are the test above)."""
    import importlib.util

    from runjob_core import plugins
    from runjob_core.models import BackendInfo, Finding, Reference, Submission

    snippets = [b for b in _blocks("python") if not b.startswith('"""runjob-shell') and "BackendContract" not in b]
    assert len(snippets) >= 3
    submission = Submission(job_id="rj-1", attempt=1, backend="shell", cluster="c", backend_job_id="1", tag="t",
                            job_dir="/j", workdir="/j", log_path="/j/log", results_dir="/r", checkpoint_dir="/c",
                            progress_path="/p", submitted_at=0.0, source="test")
    answers = {}
    for index, text in enumerate(snippets):
        path = tmp_path / f"guide_snippet_{index}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # a NameError here: the snippet uses what it does not import
        pm, _infos = plugins.get_plugin_manager(load_entrypoints=False)
        pm.register(module, name=path.stem)
        from runjob_core.context import offline_context

        context = offline_context()
        for name in ("runjob_backend_info", "runjob_references", "runjob_check_health"):
            if hasattr(module, name):
                kwargs = {"submission": submission, "window": "step 9\nloss scale underflow\n", "context": context}
                answers[name] = getattr(module, name)(**{k: v for k, v in kwargs.items()
                                                        if k in getattr(module, name).__code__.co_varnames})
    assert isinstance(answers["runjob_backend_info"], BackendInfo)
    assert all(isinstance(r, Reference) for r in answers["runjob_references"])
    [finding] = answers["runjob_check_health"]
    assert isinstance(finding, Finding) and finding.label == "loss_scale" and finding.line == 2
