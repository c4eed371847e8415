"""The job side (runjob_core/job/) is shipped whole to nodes and needs only the standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from runjob_core.staging import job_side_files


def test_the_shipped_job_package_imports_with_only_the_standard_library(tmp_path):
    for rel, (text, _mode) in job_side_files().items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    assert (tmp_path / "lib/runjob_core/job/hub.py").is_file()
    # -S: no site-packages (no runjob install, no attrs, pluggy, huggingface_hub); -E: no PYTHONPATH.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import runjob_core.job as job, runjob_core.job.hub as hub; "
        "assert hub.IncrementalUploader and job.ResultsWriter and job.uploader; "
        "outside = sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
        "and m.split('.')[0] != 'runjob_core' and not m.startswith('_')); "
        "print(','.join(outside)); print(sorted(m for m in sys.modules if m.startswith('runjob_core')))"
    )
    out = subprocess.run([sys.executable, "-S", "-E", "-c", code, str(tmp_path / "lib")], capture_output=True, text=True,
                         cwd=tmp_path, check=True).stdout.splitlines()
    assert out[0] == ""
    assert out[1] == "['runjob_core', 'runjob_core.job', 'runjob_core.job.hub']"


def test_only_the_job_side_is_shipped():
    names = sorted(job_side_files())
    assert all(name.startswith("lib/runjob_core/") for name in names)
    shipped = {Path(name).name for name in names}
    assert not shipped & {"publish.py", "validate.py", "lifecycle.py"}
