"""The SLURM job script: the job's template plus #SBATCH lines, modules and conda."""

from __future__ import annotations

import json

from runjob_core import templating
from runjob_core.config import format_slurm_time, parse_duration
from runjob_core.errors import ConfigError
from runjob_core.models import Estimate, Rendered
from runjob_slurm import _options
from runjob_slurm._parse import SBATCH_SAFE as _SBATCH_SAFE

SOURCE = "runjob-slurm"


def gres(job, cluster) -> str:
    count = job.resources.gpus
    gpu_type = job.resources.gpu_type or cluster.gpu_type
    if _options.of(cluster).gres_format == "typed" and gpu_type:
        return f"gpu:{gpu_type}:{count}"
    return f"gpu:{count}"


DEFAULT_SIGNAL_MARGIN = 300


#: SLURM checks signal times on a timer: ``--signal=B:USR1@N`` may arrive up to this many
#: seconds earlier than N before the limit (sbatch(1)).
SIGNAL_EARLY_SECONDS = 60


def fitted_default_margin(limit: int | None) -> int:
    """The default margin, cut for a short limit so the warning comes after the job has
    worked for about two thirds of it, not in its first minutes: the signal may come up to
    60 s early, so the margin is at most a third of what is left of the limit after those."""
    if limit is None:
        return DEFAULT_SIGNAL_MARGIN
    return min(DEFAULT_SIGNAL_MARGIN, max(10, (limit - SIGNAL_EARLY_SECONDS) // 3))


def margin_note(job) -> Estimate | None:
    """Pre-flight: the time-limit warning against the job's own limit, with the numbers."""
    limit = parse_duration(job.resources.time) if job.resources.time else None
    if job.template != "training" or limit is None:
        return None
    chosen = job.checkpoint.signal_margin
    if chosen is None:
        fitted = fitted_default_margin(limit)
        if fitted == DEFAULT_SIGNAL_MARGIN:
            return None
        return Estimate(source=SOURCE, summary=(
            f"time-limit warning: {fitted} s before the end of the {limit} s limit (the default {DEFAULT_SIGNAL_MARGIN} s "
            f"is cut for a short limit); SLURM may send it up to {SIGNAL_EARLY_SECONDS} s earlier, so from "
            f"{max(0, limit - fitted - SIGNAL_EARLY_SECONDS)} s into the run"), data={"signal_margin": fitted})
    earliest = limit - chosen - SIGNAL_EARLY_SECONDS
    if earliest > limit // 2:
        return None
    return Estimate(source=SOURCE, summary=(
        f"checkpoint.signal_margin {chosen} s with a {limit} s limit: SLURM may send the warning up to "
        f"{SIGNAL_EARLY_SECONDS} s early, as soon as {max(0, earliest)} s into the run, so each attempt may stop "
        "after half its time or less"),
        suggestions=(f"ask for a longer resources.time, or a checkpoint.signal_margin of at most "
                     f"{max(10, (limit - SIGNAL_EARLY_SECONDS) // 3)} s",), data={"signal_margin": chosen})


def signal_margin(job, attempt, cluster, context) -> int:
    """Seconds of warning before the time limit: the job's setting, else three times the
    longest checkpoint save that earlier attempts measured (+60 s), else 300 (cut for a
    short limit: :func:`fitted_default_margin`)."""
    if job.checkpoint.signal_margin is not None:
        return job.checkpoint.signal_margin
    if job.template != "training" or attempt.n == 1:
        return fitted_default_margin(parse_duration(job.resources.time) if job.resources.time else None)
    # The job folder (and its progress file) is shared by the attempts of one job.
    text = context.transport(cluster).read_text(attempt.layout.progress_path)
    try:
        longest = float((json.loads(text or "{}").get("metrics") or {}).get("max_save_seconds") or 0)
    except (ValueError, TypeError, AttributeError):
        longest = 0.0
    if longest:
        return int(3 * longest + 60)
    return fitted_default_margin(parse_duration(job.resources.time) if job.resources.time else None)


def render(job, attempt, cluster, templates, context) -> Rendered:
    def sbatch_value(value) -> str:
        text = str(value)
        if not _SBATCH_SAFE.match(text):
            message = (f"{text!r} cannot go on an #SBATCH line (spaces, quotes or shell characters); "
                       f"fix it in {job.source} or clusters.yaml ({cluster.source})")
            raise ConfigError(job.source, [message])
        return text

    options = _options.of(cluster)
    templates.filters["sbatch"] = sbatch_value
    templates.filters["slurm_time"] = lambda value: format_slurm_time(parse_duration(value))
    variables = {
        "job": job, "cluster": cluster, "runjob": attempt.template_vars(),
        # The cluster's SLURM keys as the script uses them (a template overriding slurm.sh.j2 may
        # also read cluster.options, the structured SlurmOptions).
        "slurm": {"gres": gres(job, cluster), "signal_margin": signal_margin(job, attempt, cluster, context),
                  "partition": options.partition(job), "account": options.account(job), "modules": options.modules},
    }
    script = templating.render(templates, "slurm.sh.j2", variables, job_source=job.source)
    return Rendered(script=script, template=f"slurm.sh.j2 + {job.template}.sbatch.j2", source=SOURCE)
