"""The smaller faults of issue 34 item 6, through the real `runjob` command: a spec nested
500 deep, the dashboard on a folder it cannot write, a local job's raw log holding an
inherited token, and the modes of runjob's own files."""

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runjob_core.testing import run_cli

pytestmark = [pytest.mark.chaos]
RUNJOB = str(Path(sys.executable).parent / "runjob")


def test_a_spec_nested_500_deep_is_one_line_naming_where(runjob_home):
    text = "name: deep\ncommand: echo hi\nparams:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(500))
    text += "  " * 501 + "v: 1\n"
    (runjob_home / "deep.yaml").write_text(text)
    assert len(text) < 1 << 20  # under the size cap: the nesting itself is what is refused
    result = run_cli("submit", "deep.yaml", "--yes", cwd=runjob_home)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "deep.yaml" in line and "$.params.k0" in line and "flatten it" in line


def _read_only(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """Run *argv* with *folder* mounted read-only in a private mount namespace (root may write
    anywhere otherwise); skip where namespaces are not allowed."""
    inner = f'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    result = subprocess.run(["unshare", "-m", "sh", "-c", inner, "sh", str(folder), *argv], capture_output=True,
                            text=True, timeout=120)
    if "mount" in result.stderr and ("denied" in result.stderr or "not permitted" in result.stderr):
        pytest.skip(f"no private mount namespace here: {result.stderr.strip()}")
    return result


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_the_dashboard_on_a_read_only_folder_is_one_line(runjob_home):
    (runjob_home / "ok.yaml").write_text(yaml.safe_dump({"name": "ok", "command": "echo hi"}))
    run_cli("run", "ok.yaml", "--yes", cwd=runjob_home)
    site = runjob_home / "site"
    site.mkdir()
    result = _read_only(site, RUNJOB, "dashboard", "--out", str(site))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert str(site) in line and "--out" in line and "Read-only file system" in line


def test_a_local_jobs_raw_log_redacts_inherited_tokens_and_runjobs_files_are_private(runjob_home, monkeypatch):
    secret = "hf_" + "q" * 30
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("MY_SERVICE_API_KEY", "plain-secret-value-42")
    (runjob_home / "leak.yaml").write_text(yaml.safe_dump({"name": "leak", "command": 'echo "token=$HF_TOKEN key=$MY_SERVICE_API_KEY"; printf "half %s\\r" "$HF_TOKEN"'}))
    result = run_cli("run", "leak.yaml", "--yes", cwd=runjob_home)
    state = runjob_home / ".runjob"
    logs = list((state / "scratch" / "logs").glob("leak.*.out"))
    assert logs, result.stderr
    raw = logs[0].read_bytes()
    assert secret.encode() not in raw and b"plain-secret-value-42" not in raw and b"token=*** key=***" in raw
    for path in [state, *state.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path == state or path.name.startswith("state.db") or path in logs:
            assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_the_log_redactors_prefilter_covers_every_token_shape():
    """The redactor skips the pattern for output holding none of _TOKEN_STARTS: a token shape
    added to runjob_core.redact must start with one of them, or it would pass unredacted."""
    import re

    from runjob_core import _log_redactor, redact

    body = redact._TOKEN_PATTERNS.pattern.removeprefix(r"\b(").removesuffix(r")\b")
    for alternative in body.split("|"):
        literal = re.match(r"[A-Za-z_-]+", alternative).group(0)
        assert any(literal.encode().startswith(start) for start in _log_redactor._TOKEN_STARTS), alternative
