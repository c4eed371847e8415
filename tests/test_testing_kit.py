"""The test kit plugin authors use: the process-spawn recorder and the fresh plugin manager."""

import pytest

from runjob_hub import artifacts


def test_fake_run_records_and_scripts_commands(fake_run, tmp_path):
    fake_run.on(["git", "-C", str(tmp_path), "rev-parse"], stdout="0123abcd\n")
    fake_run.on(["git", "-C", str(tmp_path), "status"], stdout=" M train.py\n")
    assert artifacts._git_commit(tmp_path) == ("0123abcd", True)
    assert [call[3] for call in fake_run.calls] == ["rev-parse", "status"]


def test_fake_run_refuses_unscripted_commands(fake_run):
    from runjob_core.transport import execute

    with pytest.raises(AssertionError, match="unexpected command: rm -rf"):
        execute.run(["rm", "-rf", "/"])


def test_runjob_pm_is_fresh_and_checks_plugins(runjob_pm):
    from runjob_core import hookimpl

    class Counting:
        @hookimpl
        def runjob_references(self, context):
            return []

    runjob_pm.register_for_test(Counting(), "counting")
    assert runjob_pm.get_plugin("counting") is not None
    assert runjob_pm.get_plugin("local") is None  # no entry points in a fresh manager
