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

  # A SLURM cluster reached over SSH (pip install runjob-slurm):
  # della:
  #   type: slurm
  #   host: della.example.edu
  #   user: me                  # port, identity_file, known_hosts, proxy_jump are optional
  #   default_partition: gpu
  #   default_account: mylab
  #   scratch_path: /scratch/me
  #   gres_format: typed        # typed -> --gres=gpu:h100:N ; generic -> --gres=gpu:N
  #   gpu_type: h100
  #   modules: [cuda/12.4]
  #   conda_env: rl
"""



@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def command(force: bool) -> None:
    """Write .runjob/clusters.yaml and examples/hello.yaml (+ hello.py) in this folder."""
    import importlib.resources

    examples = importlib.resources.files("runjob_core") / "data" / "examples"
    files = {
        Path(".runjob/clusters.yaml"): CLUSTERS_YAML,
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
