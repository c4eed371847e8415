"""runjob init: a commented clusters.yaml and an example job to start from."""

from __future__ import annotations

from pathlib import Path

import click

CLUSTERS_YAML = """\
# runjob clusters. runjob looks for this file in ./.runjob/, then ./.raca/, then
# ~/.config/runjob/. A built-in 'local' cluster exists even without this file.
clusters:
  local:
    type: local                 # run on this machine, detached, one process group per job
    # scratch_path: /scratch/me # default: .runjob/scratch

  # Keys every cluster takes beside type: host, user, port, identity_file, known_hosts,
  # proxy_jump, allow_unknown_host, scratch_path, gpu_type, conda_env, env. Each backend adds
  # its own (`runjob clusters keys TYPE` lists them); more backends come as plugins
  # (pip install runjob-slurm, runjob-runpod).
"""

#: Example values of the core keys a backend may require (``BackendInfo.required_keys``).
_REQUIRED_EXAMPLES = {"host": "login.example.edu", "user": "me", "scratch_path": "/scratch/me"}


def backend_examples() -> str:
    """A commented entry for each installed backend that declares keys: its required core
    keys and its own options, each with its help (what the backend declared; the core
    names none of them)."""
    from runjob_core import plugins
    from runjob_core.config import options

    blocks = []
    for name, info in sorted(plugins.backend_infos(plugins.get_plugin_manager()[0]).items()):
        docs = options.declared(info.options)
        if name == "local" or not (docs or info.required_keys):
            continue
        lines = [f"  # A {name} cluster ({info.source}):", f"  # my-{name}:", f"  #   type: {name}"]
        lines += [f"  #   {key}: {_REQUIRED_EXAMPLES.get(key, '...')}" for key in info.required_keys]
        unset = []
        for doc in docs:
            if doc.example is None and not doc.required:
                unset.append(doc.name)  # optional and off by default: named below, not shown with a made-up value
                continue
            entry = f"  #   {doc.name}: {'...' if doc.example is None else _yaml_value(doc.example)}"
            lines.append(f"{entry:<36}# {doc.help}" if doc.help else entry)
        if unset:
            lines.append(f"  #   (also: {', '.join(unset)}; `runjob clusters keys {name}` explains each key)")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(["", *blocks]) if blocks else ""


def _yaml_value(value) -> str:
    """*value* as one YAML flow value: plain words bare, the rest quoted as JSON (valid YAML)."""
    import json
    import re

    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z0-9_./@-][A-Za-z0-9_./:@ -]*", value) and not value.endswith(" ") else json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return json.dumps(value)


@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def command(force: bool) -> None:
    """Write .runjob/clusters.yaml and examples/hello.yaml (+ hello.py) in this folder."""
    import importlib.resources

    examples = importlib.resources.files("runjob_core") / "data" / "examples"
    files = {
        Path(".runjob/clusters.yaml"): CLUSTERS_YAML + backend_examples(),
        Path("examples/hello.yaml"): (examples / "hello.yaml").read_text(),
        Path("examples/hello.py"): (examples / "hello.py").read_text(),
    }
    for path, text in files.items():
        if path.exists() and not force:
            click.echo(f"kept     {path} (exists; --force overwrites)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote    {path}")
    click.echo("next:    runjob run examples/hello.yaml --yes")
