"""The templates and the reference pack ship inside the wheels (not only in the source tree)."""

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(tmp_path, project):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
                    str(project)], check=True, capture_output=True)


def test_wheels_carry_templates_and_render_from_an_installed_copy(tmp_path):
    build(tmp_path / "wheels", REPO)
    build(tmp_path / "wheels", REPO / "plugins" / "local")
    [core] = (tmp_path / "wheels").glob("runjob_core-0*.whl")
    names = zipfile.ZipFile(core).namelist()
    for template in ("base", "training", "vllm"):
        assert f"runjob_core/templates/{template}.sbatch.j2" in names
    assert any(n.startswith("runjob_core/data/references/") and n.endswith(".md") for n in names)
    assert {"runjob_core/data/dashboard/dashboard.js", "runjob_core/data/dashboard/dashboard.css"} <= set(names)
    assert "runjob_core/py.typed" in names  # type checkers read the API's annotations (PEP 561)
    site = tmp_path / "site"
    wheels = [str(w) for w in (tmp_path / "wheels").glob("*.whl")]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *wheels],
                   check=True, capture_output=True)
    probe = f"""
import sys
sys.path.insert(0, {str(site)!r})
import runjob_core, runjob_local
assert runjob_core.__file__.startswith({str(site)!r}), runjob_core.__file__
from runjob_core import templating
env = templating.make_environment(plugins=[runjob_local])
for name in ("base.sbatch.j2", "training.sbatch.j2", "vllm.sbatch.j2", "local.sh.j2"):
    env.get_template(name)
from importlib import resources
assert "makeSortable" in resources.files("runjob_core").joinpath("data", "dashboard", "dashboard.js").read_text()
from runjob_core.references import builtin_references
print(len(builtin_references()))
"""
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert int(out.strip()) >= 8


def test_one_command_moves_every_version_and_pin_in_lockstep(tmp_path):
    # issue 36: versions move together from one place (./dev version X.Y.Z)
    import re
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    copy = tmp_path / "tree"
    for rel in ["scripts/set-version.py", "runjob_core/_version.py", "pyproject.toml",
                *[str(p.relative_to(root)) for p in root.glob("plugins/*/pyproject.toml")]]:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, copy / rel)
    subprocess.run([sys.executable, str(copy / "scripts/set-version.py"), "9.8.7"], check=True, capture_output=True)
    assert '__version__ = "9.8.7"' in (copy / "runjob_core/_version.py").read_text()
    texts = [p.read_text() for p in copy.glob("plugins/*/pyproject.toml")]
    assert len(texts) == 5 and all('\nversion = "9.8.7"' in t and '"runjob-core~=9.8.7"' in t for t in texts)
    pins = re.findall(r'"runjob-(?:local|slurm|health|hub|runpod)([^"]*)"', (copy / "pyproject.toml").read_text())
    assert pins and set(pins) == {"~=9.8.7"}
