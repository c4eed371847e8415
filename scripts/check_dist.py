"""Check the release files `./dev build` made (scripts/build-release.sh), before installing them.

Every distribution (runjob-core and the five plugins) has a wheel and an sdist of one version,
the version of ``runjob_core/_version.py`` (lockstep); each plugin pins ``runjob-core~=X.Y.0``;
the package data is inside: the core's templates, data files (references, dashboard assets,
examples) and ``py.typed``, the SLURM and local backends' templates.

Run: python scripts/check_dist.py DIST_FOLDER
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DISTS = ("runjob_core", "runjob_local", "runjob_slurm", "runjob_runpod", "runjob_health", "runjob_hub")
#: Files each wheel must carry (a glob each), beyond the Python modules.
DATA = {
    "runjob_core": ["runjob_core/py.typed", "runjob_core/templates/base.sbatch.j2", "runjob_core/templates/training.sbatch.j2",
                    "runjob_core/templates/vllm.sbatch.j2", "runjob_core/data/references/*.md",
                    "runjob_core/data/dashboard/dashboard.js", "runjob_core/data/examples/hello.yaml",
                    "runjob_core/job/__init__.py", "runjob_core/warm/client.c", "runjob_core/warm/python/runjob"],
    "runjob_slurm": ["runjob_slurm/templates/*.j2"],
    "runjob_local": ["runjob_local/templates/*.j2"],
}


def main(folder: Path) -> list[str]:
    version = re.search(r'__version__ = "([^"]+)"', (ROOT / "runjob_core" / "_version.py").read_text()).group(1)
    major_minor = ".".join(version.split(".")[:2])
    problems = []
    for dist in DISTS:
        wheels = sorted(folder.glob(f"{dist}-*.whl"))
        sdists = sorted(folder.glob(f"{dist}-*.tar.gz"))
        if [w.name.split("-")[1] for w in wheels] != [version] or [s.name[len(dist) + 1:-7] for s in sdists] != [version]:
            problems.append(f"{dist}: expected one wheel and one sdist of {version}, found {[p.name for p in wheels + sdists]}")
            continue
        names = zipfile.ZipFile(wheels[0]).namelist()
        for pattern in DATA.get(dist, []):
            if not any(Path(name).match(pattern) for name in names):
                problems.append(f"{wheels[0].name} lacks {pattern}")
        sdist_names = [name.split("/", 1)[1] for name in tarfile.open(sdists[0]).getnames() if "/" in name]
        for pattern in DATA.get(dist, []):
            if not any(Path(name).match(pattern) for name in sdist_names):
                problems.append(f"{sdists[0].name} lacks {pattern}")
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = re.findall(r"^Requires-Dist: (.+)$", zipfile.ZipFile(wheels[0]).read(metadata).decode(), re.M)
        if dist != "runjob_core" and f"runjob-core~={major_minor}.0" not in [r.replace(" ", "") for r in requires]:
            problems.append(f"{wheels[0].name} must require runjob-core~={major_minor}.0 (found {requires})")
    return problems


if __name__ == "__main__":
    found = main(Path(sys.argv[1]))
    for problem in found:
        print(f"check_dist: {problem}", file=sys.stderr)
    print(f"check_dist: {len(DISTS)} distributions, {'OK' if not found else f'{len(found)} problems'}")
    sys.exit(1 if found else 0)
