"""Set runjob's version everywhere at once: ``./dev version 0.3.0``.

The one place a version is decided. The core reads its version from runjob_core/_version.py;
each plugin's pyproject.toml carries the same version and pins the core with a compatible
release (``runjob-core~=X.Y.Z``), and the core's extras pin the plugins the same way. This script rewrites all of them together; scripts/check_dist.py (``./dev build``) refuses
built files whose versions or pins are out of step."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = re.compile(r"\d+\.\d+\.\d+(?:(?:a|b|rc|\.dev)\d+)?")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not VERSION.fullmatch(argv[0]):
        print("usage: ./dev version X.Y.Z (a release like 0.3.0, 0.3.0rc1 or 0.3.0.dev1)", file=sys.stderr)
        return 2
    new = argv[0]
    core = ROOT / "runjob_core" / "_version.py"
    core.write_text(re.sub(r'__version__ = "[^"]*"', f'__version__ = "{new}"', core.read_text()))
    changed = [core]
    root = ROOT / "pyproject.toml"  # the core's extras ([slurm], [all], ...) pin the plugins of its release
    root.write_text(re.sub(r'"(runjob-(?:local|slurm|health|hub|runpod))(?:~=[^"]*)?"', rf'"\1~={new}"', root.read_text()))
    changed.append(root)
    for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        text = pyproject.read_text()
        text = re.sub(r'(?m)^version = "[^"]*"', f'version = "{new}"', text)
        text = re.sub(r'"(runjob-[a-z]+)~=[^"]*"', rf'"\1~={new}"', text)
        pyproject.write_text(text)
        changed.append(pyproject)
    for path in changed:
        print(f"{path.relative_to(ROOT)}: {new}")
    print("record the user-visible changes under this version in CHANGELOG.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
