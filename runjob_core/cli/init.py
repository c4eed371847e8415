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

HELLO_YAML = """\
# An example job: scores 20 toy questions and writes resumable JSONL results.
name: hello
cluster: local
template: base
params:
  questions: 20
  temperature: 0.0
command: python3 hello.py
"""

HELLO_PY = '''\
"""A toy eval: answers arithmetic questions, writes results with runjob's resumable writer."""
import json
import os
import time

from runjob_core.job import ResultsWriter, limit, progress

params = json.load(open(os.environ["RUNJOB_PARAMS"]))
questions = [{"id": i, "prompt": f"{i} + {i}", "answer": 2 * i} for i in range(params["questions"])]
todo = questions[: limit(len(questions))]
with ResultsWriter("results.jsonl") as out:
    for q in todo:
        if q["id"] in out.done:
            continue
        # A toy "model": adds correctly, except that it drops a carry now and then.
        a, b = (int(x) for x in q["prompt"].split(" + "))
        response = str(a + b - (1 if q["id"] % 7 == 3 else 0))
        out.write({"id": q["id"], "prompt": q["prompt"], "response": response,
                   "score": float(response == str(q["answer"])), "finish_reason": "stop"})
        progress(rows_done=len(out.done), total=len(todo))
        time.sleep(0.05)
print(f"wrote {len(out.done)} rows")
'''


@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
def command(force: bool) -> None:
    """Write .runjob/clusters.yaml and examples/hello.yaml (+ hello.py) in this folder."""
    files = {
        Path(".runjob/clusters.yaml"): CLUSTERS_YAML,
        Path("examples/hello.yaml"): HELLO_YAML,
        Path("examples/hello.py"): HELLO_PY,
    }
    for path, text in files.items():
        if path.exists() and not force:
            click.echo(f"kept     {path} (exists; --force overwrites)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote    {path}")
    click.echo("next:    runjob run examples/hello.yaml --yes")
