"""The SLURM job script: the job's template plus #SBATCH lines, modules and conda."""

from __future__ import annotations

import re

from runjob_core import templating
from runjob_core.config import format_slurm_time, parse_duration
from runjob_core.errors import ConfigError
from runjob_core.models import Rendered

SOURCE = "runjob-slurm"
# sbatch reads #SBATCH lines itself (no shell), and splits them on whitespace.
_SBATCH_SAFE = re.compile(r"^[A-Za-z0-9._:/@%+=,~-]+$")


def gres(job, cluster) -> str:
    count = job.resources.gpus
    gpu_type = job.resources.gpu_type or cluster.gpu_type
    if cluster.gres_format == "typed" and gpu_type:
        return f"gpu:{gpu_type}:{count}"
    return f"gpu:{count}"


def render(job, cluster, templates, context) -> Rendered:
    def sbatch_value(value) -> str:
        text = str(value)
        if not _SBATCH_SAFE.match(text):
            message = (f"{text!r} cannot go on an #SBATCH line (spaces, quotes or shell characters); "
                       f"fix it in {job.source} or clusters.yaml ({cluster.source})")
            raise ConfigError(job.source, [message])
        return text

    templates.filters["sbatch"] = sbatch_value
    templates.filters["slurm_time"] = lambda value: format_slurm_time(parse_duration(value))
    variables = {
        "job": job, "cluster": cluster, "runjob": context.current.template_vars(),
        "slurm": {"gres": gres(job, cluster)},
    }
    script = templating.render(templates, "slurm.sh.j2", variables, job_source=job.source)
    return Rendered(script=script, template=f"slurm.sh.j2 + {job.template}.sbatch.j2", source=SOURCE)
