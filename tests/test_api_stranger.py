"""The API and `runjob watch` as a stranger uses them: errors importable from the API, a
wait timeout that is both a RunjobError and a TimeoutError, pre-flight warnings on what
submit returns, collect of a running job refused, `watch` failing when a job failed."""

from __future__ import annotations

import pytest

from runjob_core import api
from runjob_core.testing import run_cli


def test_the_api_exports_its_errors_and_an_unknown_job_raises_one_of_them(runjob_home):
    for name in ("JobNotFoundError", "WaitTimeoutError", "BackendError", "TransportError", "UnknownBackendError"):
        assert name in api.__all__ and issubclass(getattr(api, name), api.RunjobError)
    with api.open() as rj, pytest.raises(api.JobNotFoundError, match="no job with id or name 'nope'"):
        rj.status("nope")


def test_wait_times_out_with_a_runjob_error_that_is_a_timeout_error_and_collect_refuses_a_running_job(runjob_home):
    job = api.job_from_dict({"name": "sleeper", "command": "sleep 60"}, base_dir=runjob_home)
    with api.open() as rj:
        ref = rj.submit(job)
        try:
            with pytest.raises(TimeoutError) as raised:
                rj.wait([ref], timeout=0.2)
            assert isinstance(raised.value, api.RunjobError) and isinstance(raised.value, api.WaitTimeoutError)
            assert "still running" in str(raised.value)
            with pytest.raises(api.RefusedError, match="still running"):
                rj.collect(ref)
        finally:
            rj.cancel(ref)


def test_submit_returns_the_preflight_warnings(runjob_home):
    job = api.job_from_dict({"name": "warned", "command": "true", "benchmark": "my-private-bench"}, base_dir=runjob_home)
    with api.open() as rj:
        ref = rj.submit(job)
        assert any("no benchmark reference" in warning for warning in ref.warnings), ref.warnings
        [state] = rj.wait([ref])
        assert state.ok


def test_watch_exits_non_zero_when_a_job_ended_unsuccessfully(runjob_home):
    (runjob_home / "bad.yaml").write_text("name: bad\ncommand: 'exit 3'\nresume: {auto: false}\n")
    (runjob_home / "good.yaml").write_text("name: good\ncommand: 'true'\n")
    for name in ("bad", "good"):
        assert run_cli("submit", f"{name}.yaml", "--yes", cwd=runjob_home).returncode == 0
    good = run_cli("watch", "good", cwd=runjob_home)
    assert good.returncode == 0, good.stderr
    bad = run_cli("watch", "bad", cwd=runjob_home)
    assert bad.returncode == 1 and "1 job(s) ended unsuccessfully: bad (FAILED)" in bad.stderr, bad.stderr
    both = run_cli("watch", "good", "bad", "--once", cwd=runjob_home)
    assert both.returncode == 1 and "bad (FAILED)" in both.stderr and "good" not in both.stderr.splitlines()[-1]
