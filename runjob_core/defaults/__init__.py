"""The core's own hook implementations; registered first, so they run last."""

from __future__ import annotations

import json
import re

import attrs

from runjob_core.models import Estimate, Rendered, ResumePlan

from runjob_core import hookimpl  # the one marker (runjob_core.__init__)
SOURCE = "runjob-core"


@hookimpl
def runjob_estimate(job, cluster, context):
    """GPU memory: will the model fit on the GPUs the job asks for? (see runjob_core.estimator.jobspec)

    The estimate is made at the length the job runs at: model.max_model_len, else the model's
    full length from its config.json (runjob_core.defaults.model_length), passed in the job spec."""
    if not (job.model.path or job.model.name) or job.resources.gpus <= 0:
        return None  # nothing to estimate: spare every such submit the estimator's import
    from runjob_core.defaults import model_length
    from runjob_core.estimator import preflight

    length = model_length.full_length(job, cluster, context)
    if length is not None and length != job.model.max_model_len:
        job = attrs.evolve(job, model=attrs.evolve(job.model, max_model_len=length))
    return preflight.memory_estimate(job, cluster, context, SOURCE)


@hookimpl(trylast=True)
def runjob_render(job, attempt, cluster, templates, context):
    """Render ``<backend>.sh.j2`` if the backend ships one, else the job's template."""
    from runjob_core import templating  # jinja2: only when rendering, not on every command

    backend_template = f"{cluster.type}.sh.j2"
    try:
        templates.get_template(backend_template)
        name = backend_template
    except templating.jinja2.TemplateNotFound:
        name = f"{job.template}.sbatch.j2"
    variables = {"job": job, "cluster": cluster, "runjob": attempt.template_vars()}
    script = templating.render(templates, name, variables, job_source=job.source)
    return Rendered(script=script, template=name, source=SOURCE)


@hookimpl(trylast=True)
def runjob_resume(job, submission, status, context):
    """Resume from the newest complete checkpoint in the job's checkpoint folder.

    A checkpoint counts only if its completion marker (written by
    ``runjob_core.job.checkpoint_saved`` after the files) lists files whose sizes still
    match, or, for a Trainer ``checkpoint-N`` folder without a marker, if Trainer's last
    file in it is whole (:func:`_verify_trainer_checkpoint`). Without any, the job resumes
    from its results alone (rows already written are skipped by ``ResultsWriter``).
    """
    transport = context.transport_for(submission)
    root = submission.checkpoint_dir
    best, best_step, skipped = None, -1, []
    if root:
        listing = transport.listdir_recursive(root)
        marked = {info.path.split("/", 1)[0] for info in listing if info.path.endswith("/.runjob_complete")}
        for info in listing:
            if info.path.count("/") != 1:
                continue
            name, file = info.path.split("/")
            folder = root.rstrip("/") + "/" + name
            if file == ".runjob_complete":
                verdict = _verify_checkpoint(transport, folder)
            elif file == _TRAINER_STATE and name not in marked and _TRAINER_FOLDER.fullmatch(name):
                # A Trainer job that calls nothing of runjob's: its own folders count.
                verdict = _verify_trainer_checkpoint(transport, folder, int(name.rsplit("-", 1)[1]))
            else:
                continue
            if verdict is None:
                skipped.append(folder)
                continue
            if verdict > best_step:
                best, best_step = folder, verdict
    if best is None:
        reason = "no complete checkpoint; resuming from the results written so far"
        if skipped:
            reason += f" (skipped incomplete: {', '.join(skipped)})"
        return ResumePlan(source=SOURCE, reason=reason)
    return ResumePlan(
        source=SOURCE,
        reason=f"newest complete checkpoint is step {best_step}",
        checkpoint=best,
        step=best_step,
        env={"RUNJOB_RESUME_STEP": str(best_step)},
    )


#: transformers.Trainer's checkpoint folders and the file it writes last in each.
_TRAINER_FOLDER = re.compile(r"checkpoint-\d+")
_TRAINER_STATE = "trainer_state.json"


def _verify_trainer_checkpoint(transport, folder: str, step: int) -> int | None:
    """The step of a Trainer ``checkpoint-N`` folder without runjob's marker, or None.

    Trainer writes ``trainer_state.json`` after the weights, optimizer and RNG states, so
    a folder holding it whole (it parses, its ``global_step`` is N) had its save finished;
    the weights' safetensors headers are checked as for a marked checkpoint."""
    try:
        state = json.loads(transport.read_text(f"{folder}/{_TRAINER_STATE}") or "")
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get("global_step") != step:
        return None
    for info in transport.listdir_recursive(folder):
        if info.path.endswith(".safetensors") and not _safetensors_header_ok(transport, f"{folder}/{info.path}", info.size):
            return None
    return step


def _verify_checkpoint(transport, folder: str) -> int | None:
    """Return the step of a complete checkpoint, or None if it is torn or corrupt."""
    text = transport.read_text(folder + "/.runjob_complete")
    try:
        meta = json.loads(text or "")
        step = int(meta["step"])
    except (ValueError, KeyError, TypeError):
        return None
    present = {info.path: info.size for info in transport.listdir_recursive(folder)}
    for name, size in meta.get("files", {}).items():
        if present.get(name) != size:
            return None
        if name.endswith(".json") and size < (1 << 20):
            try:
                json.loads(transport.read_text(folder + "/" + name) or "")
            except ValueError:
                return None
        if name.endswith(".safetensors") and not _safetensors_header_ok(transport, folder + "/" + name, size):
            return None
    return step


def _safetensors_header_ok(transport, path: str, size: int) -> bool:
    head = transport.read_from(path, 0, 8)
    if len(head) < 8:
        return False
    header_len = int.from_bytes(head, "little")
    if header_len <= 0 or 8 + header_len > size:
        return False
    try:
        header = json.loads(transport.read_from(path, 8, header_len))
    except ValueError:
        return False
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    return 8 + header_len + max(ends, default=0) == size
