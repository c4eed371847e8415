"""Plugin commands as a stranger sees them: listed with their own one-line help, a broken
one marked broken, one hidden by a core command of the same name said so; `runjob plugins`
names each plugin's commands. `runjob --help` still imports no plugin: the help is read by
commands that load the plugins anyway (`runjob plugins`, the warm process) and cached."""

from __future__ import annotations

import json

from runjob_core.testing import run_cli

COMMANDS = '''
import click


@click.command("hello")
def hello():
    """Say hello from a third-party plugin.

    A second paragraph the listing leaves out.
    """


@click.command("status")
def status():
    """A plugin's own status (hidden by runjob's)."""
'''


def _fake_dist(root):
    (root / "cmdplug").mkdir(parents=True)
    (root / "cmdplug" / "__init__.py").write_text(COMMANDS)
    (root / "cmdplug" / "broken.py").write_text("raise ImportError('needs a missing dependency')\n")
    info = root / "cmdplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cmdplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[runjob.commands]\nhello = cmdplug:hello\nstatus = cmdplug:status\nexplode = cmdplug.broken:command\n")


def test_plugin_commands_are_listed_with_their_help_broken_and_hidden_ones_said_so(tmp_path):
    _fake_dist(tmp_path / "site")
    env = {"PYTHONPATH": str(tmp_path / "site"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    before = run_cli("--help", cwd=tmp_path, env=env)  # not described yet: --help imports no plugin to find out
    assert "(run `runjob plugins` to describe it) [cmdplug]" in before.stdout
    listed = run_cli("plugins", "--json", cwd=tmp_path, env=env)  # loads the plugins anyway: describes them
    shown = run_cli("--help", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    hello = next(line for line in lines if line.strip().startswith("hello "))
    assert "Say hello from a third-party plugin." in hello and "[cmdplug]" in hello
    explode = next(line for line in lines if line.strip().startswith("explode "))
    assert "BROKEN" in explode
    assert "Plugin commands hidden by runjob's own" in shown.stdout
    assert "from cmdplug: runjob's 'status' runs instead" in shown.stdout

    # The listing comes from the cache: no plugin imported.
    again = run_cli("--help", cwd=tmp_path, env={**env, "PYTHONVERBOSE": "1"})
    assert "import 'cmdplug'" not in again.stderr and "Say hello" in again.stdout

    [entry] = [e for e in json.loads(listed.stdout) if e["dist"] == "cmdplug"]
    commands = {c["name"]: c for c in entry["commands"]}
    assert commands["hello"] == {"name": "hello", "dist": "cmdplug", "help": "Say hello from a third-party plugin.", "hidden": False}
    assert commands["status"]["hidden"] and commands["explode"]["help"].startswith("BROKEN")
    publish = [e for e in json.loads(listed.stdout) if e["dist"] == "runjob-hub"]
    assert [c["name"] for e in publish for c in e["commands"]] == ["publish"]
    table = run_cli("plugins", cwd=tmp_path, env=env)
    assert "hello" in table.stdout and "BROKEN" in table.stdout
