"""The SLURM job script: the job's template plus #SBATCH lines, modules and conda."""

from __future__ import annotations

import json
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


DEFAULT_SIGNAL_MARGIN = 300


def signal_margin(job, attempt, cluster, context) -> int:
    """Seconds of warning before the time limit: the job's setting, else three times the
    longest checkpoint save that earlier attempts measured (+60 s), else 300."""
    if job.checkpoint.signal_margin is not None:
        return job.checkpoint.signal_margin
    if job.template != "training" or attempt.n == 1:
        return DEFAULT_SIGNAL_MARGIN
    # The job folder (and its progress file) is shared by the attempts of one job.
    text = context.transport(cluster).read_text(attempt.layout.progress_path)
    try:
        longest = float((json.loads(text or "{}").get("metrics") or {}).get("max_save_seconds") or 0)
    except (ValueError, TypeError, AttributeError):
        longest = 0.0
    return int(3 * longest + 60) if longest else DEFAULT_SIGNAL_MARGIN


def render(job, attempt, cluster, templates, context) -> Rendered:
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
        "job": job, "cluster": cluster, "runjob": attempt.template_vars(),
        "slurm": {"gres": gres(job, cluster), "signal_margin": signal_margin(job, attempt, cluster, context)},
    }
    script = templating.render(templates, "slurm.sh.j2", variables, job_source=job.source)
    return Rendered(script=script, template=f"slurm.sh.j2 + {job.template}.sbatch.j2", source=SOURCE)
