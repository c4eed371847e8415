"""The remote transports' tar stream (``runjob_core.transport.tree.command``): files with the
same bytes go once, the others as hard links (a sweep's 1,000 folders each get the same
job-side library); unpacked here by the same shell line the cluster runs (bash, GNU tar)."""

import os
import subprocess

from runjob_core.transport.tree import command as _tree_command

LIBRARY = "x = 1\n" * 20_000  # 120 KB


def unpack(root, files):
    command, stream = _tree_command(str(root), files, ())
    subprocess.run(["bash", "-c", command], input=stream, check=True)
    return len(stream)


def test_identical_files_go_once_and_unpack_as_links_that_a_later_write_breaks(tmp_path):
    files = {f"el{i}/lib/job.py": (LIBRARY, 0o644) for i in range(50)}
    files.update({f"el{i}/run.sh": (f"#!/bin/bash\necho {i}\n", 0o755) for i in range(50)})
    sent = unpack(tmp_path, files)
    assert sent < 3 * len(LIBRARY)  # the library once (and 100 headers), not 50 times (8 MB)
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


def _unpacked(root):
    return {str(p.relative_to(root)): (p.read_text(), p.stat().st_mode & 0o777, p.stat().st_nlink)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_ustar_writer_unpacks_as_pythons_tarfile_does_long_paths_included(tmp_path):
    import io
    import tarfile

    from runjob_core.transport import tree

    long_folder = "sweep-" + "x" * 120  # over ustar's 100-byte name: split into prefix and name
    files = {f"el{i}/lib/job.py": (LIBRARY, 0o644) for i in range(3)}
    files.update({f"{long_folder}/el{i}/run.sh": (f"#!/bin/bash\necho é {i}\n", 0o755) for i in range(3)})
    files["top.txt"] = ("", 0o600)
    ours, theirs = tree._ustar(files, 1_700_000_000), tree._tarfile(files, 1_700_000_000)
    assert ours is not None and len(ours) < len(theirs)  # no PAX records
    members = tarfile.open(fileobj=io.BytesIO(ours)).getmembers()  # checksums and fields as tarfile reads them
    assert [(m.name, m.size, m.mode, m.mtime, m.islnk()) for m in members] == \
           [(m.name, m.size, m.mode, m.mtime, m.islnk()) for m in tarfile.open(fileobj=io.BytesIO(theirs)).getmembers()]
    for name, archive in (("ours", ours), ("theirs", theirs)):
        (tmp_path / name).mkdir()
        subprocess.run(["tar", "-x", "-m", "-C", str(tmp_path / name), "-f", "-"], input=archive, check=True)
    assert _unpacked(tmp_path / "ours") == _unpacked(tmp_path / "theirs")
    assert _unpacked(tmp_path / "ours")["el1/lib/job.py"][2] == 3  # linked


def test_a_path_ustar_cannot_hold_goes_through_tarfile(tmp_path):
    from runjob_core.transport import tree

    unsplittable = "d/" + "y" * 150 + ".txt"  # a 150-byte last part
    assert tree._ustar({unsplittable: ("z\n", 0o644)}, 0) is None
    linked_far = {f"{'f' * 60}/{'g' * 50}/lib{i}.py": (LIBRARY, 0o644) for i in range(2)}  # a 100+ byte link name
    assert tree._ustar(linked_far, 0) is None
    unpack(tmp_path, {unsplittable: ("z\n", 0o644), "ok.txt": ("fine\n", 0o644)})
    assert (tmp_path / unsplittable).read_text() == "z\n" and (tmp_path / "ok.txt").read_text() == "fine\n"


def test_the_job_folder_is_made_as_mkdir_p_would_make_it_through_a_linked_scratch_folder(tmp_path):
    """The members are named from "/" (issue 29: no mkdir process on the host for the job's
    folder): its missing parents get the umask's mode, a scratch folder that is a link to
    another disk stays a link, and a folder of also_make that is there keeps its own mode."""
    real, linked = tmp_path / "disk", tmp_path / "scratch"
    real.mkdir()
    linked.symlink_to(real)
    logs = linked / "logs"
    logs.mkdir(mode=0o700)
    os.chmod(logs, 0o700)
    fresh = linked / "more-logs"
    root = linked / "jobs" / "name" / "rj-1"
    command, stream = _tree_command(str(root), {"run.sh": ("#!/bin/bash\n", 0o755), "lib/job.py": (LIBRARY, 0o644),
                                                "lib/copy.py": (LIBRARY, 0o644)}, (str(logs), str(fresh)))
    assert command.startswith("{ [ -d ") and command.endswith("gzip -d | tar -x -m -C / -f -")
    subprocess.run(["bash", "-c", f"umask 027; {command}"], input=stream, check=True)
    assert linked.is_symlink() and (real / "jobs" / "name" / "rj-1" / "run.sh").read_text() == "#!/bin/bash\n"
    assert os.stat(real / "jobs" / "name" / "rj-1" / "lib" / "copy.py").st_nlink == 2  # linked within the folder
    for folder in (real / "jobs", real / "jobs" / "name", root, fresh):
        assert os.stat(folder).st_mode & 0o777 == 0o750, folder  # 0777 less the umask, as mkdir -p
    assert os.stat(logs).st_mode & 0o777 == 0o700  # there already: left as it was


def test_a_small_tree_goes_as_plain_tar_and_a_large_one_gzipped(tmp_path):
    """A single job's folder (~48 KB) unpacks sooner as it is than gzipped (no compression here,
    no gzip process there); a sweep's folders, near-identical, shrink ~40x and go gzipped."""
    from runjob_core.transport import tree

    small = {"run.sh": ("#!/bin/bash\necho small\n", 0o755), "lib/job.py": ("y = 2\n" * 5_000, 0o644)}
    command, stream = _tree_command(str(tmp_path / "small"), small, ())
    assert "gzip" not in command and stream[257:262] == b"ustar" and len(stream) < tree.GZIP_FROM
    subprocess.run(["bash", "-c", command], input=stream, check=True)
    assert (tmp_path / "small" / "lib" / "job.py").read_text() == "y = 2\n" * 5_000
    large = {f"el{i}/run.sh": (f"#!/bin/bash\necho {i}\n" + "# padding\n" * 100, 0o755) for i in range(100)}
    command, stream = _tree_command(str(tmp_path / "large"), large, ())
    assert command.startswith("gzip -d | ") and stream[:2] == b"\x1f\x8b" and len(stream) < tree.GZIP_FROM // 10
    subprocess.run(["bash", "-c", command], input=stream, check=True)
    assert (tmp_path / "large" / "el42" / "run.sh").read_text().startswith("#!/bin/bash\necho 42\n")
