"""The remote transports' tar stream (``runjob_core.transport.tree.command``): files with the
same bytes go once, the others as hard links (a sweep's 1,000 folders each get the same
job-side library); unpacked here by the same shell line the cluster runs (bash, base64, GNU
tar)."""

import os
import subprocess

from runjob_core.transport.tree import command as _tree_command

LIBRARY = "x = 1\n" * 20_000  # 120 KB


def unpack(root, files):
    command, encoded = _tree_command(str(root), files, ())
    subprocess.run(["bash", "-c", command], input=encoded, text=True, check=True)
    return len(encoded)


def test_identical_files_go_once_and_unpack_as_links_that_a_later_write_breaks(tmp_path):
    files = {f"el{i}/lib/job.py": (LIBRARY, 0o644) for i in range(50)}
    files.update({f"el{i}/run.sh": (f"#!/bin/bash\necho {i}\n", 0o755) for i in range(50)})
    sent = unpack(tmp_path, files)
    assert sent < 3 * len(LIBRARY)  # the library once (base64, and 100 headers), not 50 times (8 MB)
    first = os.stat(tmp_path / "el0" / "lib" / "job.py")
    assert first.st_nlink == 50 and all((tmp_path / f"el{i}" / "lib" / "job.py").read_text() == LIBRARY for i in range(50))
    assert (tmp_path / "el7" / "run.sh").read_text() == "#!/bin/bash\necho 7\n"
    assert os.stat(tmp_path / "el7" / "run.sh").st_mode & 0o777 == 0o755
    # A resumed element's folder written again: its own file, the others untouched.
    unpack(tmp_path / "el3", {"lib/job.py": ("changed\n" * 300, 0o644)})
    assert (tmp_path / "el3" / "lib" / "job.py").read_text() == "changed\n" * 300
    assert (tmp_path / "el4" / "lib" / "job.py").read_text() == LIBRARY
    assert os.stat(tmp_path / "el4" / "lib" / "job.py").st_nlink == 49


def test_small_or_differently_moded_files_are_not_linked(tmp_path):
    unpack(tmp_path, {"a/small": ("tiny\n", 0o644), "b/small": ("tiny\n", 0o644),
                      "a/big": (LIBRARY, 0o644), "b/big": (LIBRARY, 0o755)})
    assert os.stat(tmp_path / "a" / "small").st_nlink == 1 and os.stat(tmp_path / "b" / "big").st_nlink == 1
    assert os.stat(tmp_path / "b" / "big").st_mode & 0o777 == 0o755
