"""Validation of the ``model:`` keys that the vllm template's server and the model-length
pre-flight read (called from :func:`runjob_core.config._check_job`). One line per problem,
naming the file, the key path and the fix."""

from __future__ import annotations

#: ``vllm serve`` options runjob sets itself, and the job key that sets each one.
RUNJOB_SERVE_OPTIONS = {
    "--port": "runjob picks a free port (RUNJOB_VLLM_URL)",
    "--host": "the server listens on 127.0.0.1 only",
    "--api-key": "runjob gives the server a per-attempt key (OPENAI_API_KEY)",
    "--served-model-name": "model.name",
    "--tensor-parallel-size": "resources.gpus",
    "--max-model-len": "model.max_model_len",
    "--dtype": "model.dtype",
}


def serving_problems(job, label: str) -> list[str]:
    model, problems = job.model, []
    for key in ("max_model_len", "max_tokens"):
        value = getattr(model, key)
        if value is not None and value <= 0:
            problems.append(f"invalid length {value} at $.model.{key} in {label}: a positive number of tokens")
    if model.max_model_len and model.max_tokens and model.max_tokens > model.max_model_len:
        problems.append(f"model.max_tokens {model.max_tokens} is above model.max_model_len {model.max_model_len} at "
                        f"$.model.max_tokens in {label}: the output cannot be longer than the context")
    if model.max_tokens_reason is not None and not model.max_tokens_reason.strip():
        problems.append(f"empty model.max_tokens_reason at $.model.max_tokens_reason in {label}: say why the length "
                        "is below the model's full length, or remove the key")
    for i, arg in enumerate(model.serve_args):
        option = arg.split("=", 1)[0]
        if option in RUNJOB_SERVE_OPTIONS:
            problems.append(f"{option} at $.model.serve_args[{i}] in {label} is set by runjob "
                            f"({RUNJOB_SERVE_OPTIONS[option]}); remove it from serve_args")
    if job.template != "vllm" or not model.serve:
        return problems
    if not (model.name or model.path):
        problems.append(f"template vllm serves a model but none is named at $.model in {label}: set model.name "
                        "(or model.path), or model.serve: false to run vLLM inside the command")
    if job.resources.nodes > 1:
        problems.append(f"resources.nodes is {job.resources.nodes} at $.resources.nodes in {label}, but a served model "
                        "runs on one node (tensor parallel over its GPUs); set resources.nodes: 1, or model.serve: false "
                        "and start multi-node vLLM yourself")
    return problems
