"""Pre-flight: the job's lengths against the model's own maximum context.

The mission's first hard rule is "never truncate output: use the model's full supported
max_tokens / max_model_len". For a job that names a model (``vllm`` template, or any job that
sets ``model.max_tokens`` / ``model.max_model_len``), this reads the model's ``config.json``
(``_model_config``) and answers with an :class:`Estimate`:

* ``model.max_model_len`` above the model's maximum: refused, naming both numbers;
* ``model.max_tokens`` or ``model.max_model_len`` below it: refused with the rule quoted,
  unless ``model.max_tokens_reason`` says why (``--force`` also submits it);
* the model's config cannot be read (offline, gated, no huggingface_hub): a warning only.

The seam for the memory estimate: :func:`full_length` gives the length the job runs at
(``model.max_model_len``, else the model's maximum, which vLLM uses by default), read once per
invocation; ``runjob_core.defaults`` passes it to the estimator as ``max_model_len``.
"""

from __future__ import annotations


from runjob_core.models import Estimate

from runjob_core import hookimpl  # the one marker (runjob_core.__init__)
SOURCE = "runjob-core"
RULE = "never truncate output: use the model's full supported max_tokens / max_model_len"


def _applies(job) -> bool:
    model = job.model
    if not (model.name or model.path) or job.template == "training":
        return False
    return job.template == "vllm" or model.max_tokens is not None or model.max_model_len is not None


def supported(job, cluster, context):
    """The model's maximum context (``ModelLength``) or why it is unknown (``Unknown``);
    read once per invocation and model."""
    from runjob_core.defaults import model_config as _model_config
    cache = context.core_memory.model_lengths
    key = (cluster.name, job.model.path, job.model.name)
    if key not in cache:
        # A backend that creates a machine per attempt has no machine yet to read model.path on.
        readable = job.model.path and not context.backend_info(cluster.type).machine_per_job
        transport = context.transport(cluster) if readable else None
        cache[key] = _model_config.model_length(job, lambda path: transport.read_text(path) if transport else None)
    return cache[key]


def full_length(job, cluster, context) -> int | None:
    """The context length the job runs at: ``model.max_model_len``, else the model's maximum
    (what vLLM uses when --max-model-len is not given), else None (unknown)."""
    if job.model.max_model_len is not None:
        return job.model.max_model_len
    if not _applies(job):
        return None
    from runjob_core.defaults.model_config import ModelLength

    found = supported(job, cluster, context)
    return found.tokens if isinstance(found, ModelLength) else None


@hookimpl
def runjob_estimate(job, cluster, context):
    if job.resources.nodes > 1 and cluster.type == "local":
        return Estimate(source=SOURCE, fits=False, summary=f"resources.nodes is {job.resources.nodes}, but cluster "
                        f"{cluster.name!r} is this one machine", suggestions=("set resources.nodes: 1, or run it on a SLURM cluster",))
    if not _applies(job):
        return None
    from runjob_core.defaults.model_config import Unknown

    found = supported(job, cluster, context)
    model = job.model.name or job.model.path
    if isinstance(found, Unknown):
        return Estimate(source=SOURCE, summary=f"warning: the model's maximum length was not checked: {found.reason}",
                        fits=None, data={"model": model})
    full, spec = found.tokens, job.model
    asked = (f"max_model_len {spec.max_model_len if spec.max_model_len is not None else f'unset (vLLM uses {full})'}, "
             f"max_tokens {spec.max_tokens if spec.max_tokens is not None else 'unset (the full length)'}")
    data = {"model": model, "supported": full, "why": found.why, "where": found.where,
            "max_model_len": spec.max_model_len, "max_tokens": spec.max_tokens}
    head = f"{model} supports {full} tokens ({found.why}; {found.where}); the job asks {asked}"
    if spec.max_model_len is not None and spec.max_model_len > full:
        return Estimate(source=SOURCE, fits=False, data=data,
                        summary=f"model.max_model_len {spec.max_model_len} is above the {full} tokens {model} supports "
                                f"({found.why})",
                        suggestions=(f"set model.max_model_len to {full} or less, or leave it unset",))
    short = [f"model.{key} {value}" for key, value in (("max_model_len", spec.max_model_len), ("max_tokens", spec.max_tokens))
             if value is not None and value < full]
    if short and not spec.max_tokens_reason:
        return Estimate(source=SOURCE, fits=False, data=data,
                        summary=f"{' and '.join(short)} {'is' if len(short) == 1 else 'are'} below the {full} tokens "
                                f"{model} supports ({found.why}); the mission's rule: \"{RULE}\"",
                        suggestions=(f"remove {'it' if len(short) == 1 else 'them'} or set {'it' if len(short) == 1 else 'them'} "
                                     f"to {full}, or say why in model.max_tokens_reason (or submit with --force)",))
    if short:
        head += f"; shorter on purpose: {spec.max_tokens_reason}"
    return Estimate(source=SOURCE, summary=head, fits=None, data=data)
