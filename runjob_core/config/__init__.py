"""Loading ``clusters.yaml`` and ``job.yaml`` into frozen records.

Strict about types and unknown keys (the private cattrs converter in ``config.converter``). Every
problem becomes one line that names the file and the key path (``unknown key 'resourcs' at
$ in job.yaml``); all problems of a file are reported together, without a traceback.

PyYAML and cattrs are imported only when a file has to be parsed: a file already seen
with the same bytes comes from the spec cache (``_spec_cache``), which keeps them off the
path of a repeated ``runjob submit``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from runjob_core.config._describe import describe_value  # noqa: F401 - re-exported: references use it
from runjob_core.errors import ConfigError
from runjob_core.models import JOB_NAME_RE, ClusterConfig, JobSpec

T = TypeVar("T")

CLUSTER_FILE = "clusters.yaml"
#: Folders searched for clusters.yaml, in order (the seed skill kept it in .raca/).
PROJECT_DIRS = (".runjob", ".raca")
TEMPLATES = ("base", "training", "vllm")


def structure(raw: Any, cls: type[T], *, source: str, path: str = "$") -> T:
    """Structure *raw* into *cls*, reporting every problem with its full key path."""
    from runjob_core.config import converter as _structure
    return _structure.structure(raw, cls, source=source, path=path)


def unstructure(obj: Any) -> Any:
    """A record as plain data (dicts, lists, strings, numbers) for JSON.

    ``attrs.asdict`` gives what the cattrs converter's unstructure gives for these records
    (a test pins it), without importing cattrs on every command."""
    return attrs.asdict(obj, recurse=True)


# -------------------------------------------------------------------- YAML files


def load_yaml(text: str | bytes) -> Any:
    import yaml

    # libyaml's parser when PyYAML has it: about 10x faster than the pure-Python one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def _read_bytes(path: Path) -> bytes:
    label = str(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(label, [f"{label}: file not found"]) from None
    except IsADirectoryError:
        raise ConfigError(label, [f"{label}: is a folder, not a YAML file"]) from None
    except OSError as exc:
        raise ConfigError(label, [f"{label}: cannot read ({exc.strerror})"]) from None


def _parse_yaml(data: bytes, label: str) -> Any:
    import yaml

    from runjob_core.config import guard as _input_guard
    too_big = _input_guard.check_size(data, label)
    if too_big:
        raise ConfigError(label, [too_big])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(label, [f"{label} is not UTF-8 text (byte {exc.start}): save it as UTF-8"]) from None
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(label, [f"YAML syntax error in {label}{where}: {problem}"]) from None
    too_many = _input_guard.check_expansion(raw, label)
    if too_many:
        raise ConfigError(label, [too_many])
    return raw


def read_yaml(path: Path) -> Any:
    return _parse_yaml(_read_bytes(path), str(path))


# -------------------------------------------------------------------- durations


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | int | float) -> int:
    """Parse a SLURM time (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) or
    ``90s``/``30m``/``2h``/``1d`` into seconds. A bare number means minutes, as in SLURM."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 60)
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
    if match:
        return int(float(match.group(1)) * _DURATION_UNITS[match.group(2)])
    days = 0
    if "-" in text:
        day_text, _, text = text.partition("-")
        if not day_text.isdigit():
            raise ValueError(value)
        days = int(day_text)
        parts = [int(p) for p in text.split(":")] if re.fullmatch(r"\d+(:\d+){0,2}", text) else None
        if parts is None:
            raise ValueError(value)
        parts += [0] * (3 - len(parts))
        hours, minutes, seconds = parts
    else:
        if not re.fullmatch(r"\d+(:\d+){0,2}", text):
            raise ValueError(value)
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, minutes, seconds = 0, parts[0], parts[1]
        else:
            hours, minutes, seconds = parts
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def format_slurm_time(seconds: int) -> str:
    """Seconds as SLURM's ``D-HH:MM:SS`` (rounded up to whole minutes, SLURM's resolution)."""
    minutes = max(1, -(-int(seconds) // 60))
    days, rest = divmod(minutes * 60, 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:00"
    return f"{days}-{text}" if days else text


_MEM_RE = re.compile(r"^\d+(\.\d+)?\s*[KMGT]?B?$", re.IGNORECASE)


# -------------------------------------------------------------------- clusters


def local_cluster() -> ClusterConfig:
    return ClusterConfig(name="local", type="local", scratch_path=None, source="built-in")


def find_clusters_file(cwd: Path | None = None) -> Path | None:
    """The clusters.yaml in use: $RUNJOB_CLUSTERS, ./.runjob/, ./.raca/, the user config dir."""
    override = os.environ.get("RUNJOB_CLUSTERS")
    if override:
        return Path(override)
    cwd = cwd or Path.cwd()
    for folder in PROJECT_DIRS:
        candidate = cwd / folder / CLUSTER_FILE
        if candidate.is_file():
            return candidate
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    candidate = config_home / "runjob" / CLUSTER_FILE
    return candidate if candidate.is_file() else None


def load_clusters(path: Path | None = None, *, backends: Mapping[str, Any] | None = None) -> dict[str, ClusterConfig]:
    """All configured clusters, plus the built-in ``local`` one unless the file defines it.

    *backends* maps backend names to their :class:`~runjob_core.models.BackendInfo`: a
    cluster's keys beyond the core's are validated against its backend's declared
    ``options`` class. Without it, the installed plugins are asked.
    """
    path = path if path is not None else find_clusters_file()
    if path is None:
        return {"local": local_cluster()}
    data = _read_bytes(path)
    if backends is None:
        from runjob_core import plugins

        backends = plugins.backend_infos(plugins.get_plugin_manager()[0])
    from runjob_core.config import cache as _spec_cache  # The declared option schemas shape the result: a plugin upgrade must not reuse it.
    schemas = sorted((name, _schema_stamp(info)) for name, info in backends.items())
    where = f"{path}|{json.dumps(schemas)}"
    return _spec_cache.cached("clusters", data, where, lambda: _clusters_from_yaml(data, str(path), backends))


def _schema_stamp(info: Any) -> list[str]:
    options = getattr(info, "options", None)
    fields = [f"{f.name}:{_type_name(f.type)}:{dict(f.metadata)!r}" for f in attrs.fields(options)] if options is not None else []
    return [getattr(options, "__module__", ""), getattr(options, "__qualname__", ""), _module_stamp(options), *fields,
            *getattr(info, "required_keys", ())]


def _type_name(annotation: Any) -> str:
    """A field's type as written, whether or not its annotations were resolved yet (structuring
    resolves them: ``'str'`` becomes ``str``, and the first load of a process missed the cache
    entry every later load had written)."""
    if isinstance(annotation, str):
        return annotation
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def _module_stamp(options: Any) -> str:
    """The file that defines *options* (its rules, ``problems()``, run only on a cache miss):
    a changed plugin must not reuse an entry its old rules passed."""
    import sys

    module = sys.modules.get(getattr(options, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    try:
        info = os.stat(path)
    except OSError:
        return path
    return f"{path}:{info.st_mtime_ns}:{info.st_size}"


#: Keys of a cluster entry that the core owns; the rest belong to the backend.
_NOT_YAML_KEYS = ("name", "source", "options")


def _core_keys() -> list[str]:
    return [f.name for f in attrs.fields(ClusterConfig) if f.name not in _NOT_YAML_KEYS]


def _clusters_from_yaml(data: bytes, label: str, backends: Mapping[str, Any] | None = None) -> dict[str, ClusterConfig]:
    clusters = {"local": local_cluster()}
    raw = _parse_yaml(data, label)
    if raw is None:
        return clusters
    if not isinstance(raw, Mapping) or set(raw) - {"clusters"}:
        extra = sorted(set(raw) - {"clusters"}) if isinstance(raw, Mapping) else []
        what = f"unknown key {', '.join(repr(k) for k in extra)} at $" if extra else "expected a mapping with 'clusters:' at $"
        raise ConfigError(label, [f"{what} in {label} (the file holds one key, 'clusters:')"])
    entries = raw.get("clusters") or {}
    if not isinstance(entries, Mapping):
        raise ConfigError(label, [f"expected a mapping of cluster names at $.clusters in {label}, got {describe_value(entries)}"])
    from runjob_core.config import guard as _input_guard
    problems: list[str] = _input_guard.token_problems(entries, label, "$.clusters")
    for name, entry in entries.items():
        where = f"$.clusters.{name}"
        if entry is None:
            entry = {}
        if not isinstance(entry, Mapping):
            problems.append(f"expected a mapping at {where} in {label}, got {describe_value(entry)}")
            continue
        if "name" in entry or "source" in entry:
            key = "name" if "name" in entry else "source"
            problems.append(f"unknown key '{key}' at {where} in {label} (the cluster's name is its key)")
            continue
        entry_problems: list[str] = []
        core, options = _split_backend_keys(entry, where, label, backends or {}, entry_problems)
        try:
            cluster = structure({**core, "name": str(name), "source": label}, ClusterConfig, source=label, path=where)
        except ConfigError as exc:
            entry_problems.extend(exc.problems)
            cluster = None
        if cluster is not None:
            info = (backends or {}).get(cluster.type)
            entry_problems.extend(_check_cluster(cluster, where, label, info))
            cluster = attrs.evolve(cluster, options=options)
            if not entry_problems:  # rules across keys say nothing useful about an entry with a misspelled key
                from runjob_core.config import options as _options

                entry_problems.extend(_options.problems(cluster, where, label))
        problems.extend(entry_problems)
        if cluster is not None and not entry_problems:
            clusters[str(name)] = cluster
    if problems:
        raise ConfigError(label, problems)
    return clusters


def _split_backend_keys(entry: Mapping[str, Any], where: str, label: str, backends: Mapping[str, Any],
                        problems: list[str]) -> tuple[dict[str, Any], Any]:
    """Split a cluster entry into the core's keys and its backend's (structured by the
    backend's declared ``options`` class). Keys neither knows are errors with a hint."""
    kind = entry.get("type", "local")
    info = backends.get(kind) if isinstance(kind, str) else None
    core_names = set(_core_keys())
    core = {k: v for k, v in entry.items() if k in core_names}
    rest = {k: v for k, v in entry.items() if k not in core_names}
    if info is None:
        # A backend that is not installed: its keys are kept for it, unchecked; using the
        # cluster says which package to install (plugins.require_backend).
        return core, (dict(rest) if rest else None)
    option_cls = getattr(info, "options", None)
    option_names = [f.name for f in attrs.fields(option_cls)] if option_cls is not None else []
    for key in sorted(set(rest) - set(option_names), key=str):
        problems.append(f"unknown key '{key}' at {where} in {label} (backend {kind!r})"
                        + _unknown_key_hint(str(key), kind, sorted(core_names) + option_names, backends))
    if option_cls is None:
        return core, None
    values = {k: v for k, v in rest.items() if k in option_names}
    try:
        return core, structure(values, option_cls, source=label, path=where)
    except ConfigError as exc:
        problems.extend(exc.problems)
        return core, None


def _unknown_key_hint(key: str, kind: str, known: list[str], backends: Mapping[str, Any]) -> str:
    """The fix for an unknown key: another backend's key (set ``type:``), else the closest
    known one, else where the keys are listed."""
    import difflib

    owners = sorted(name for name, info in backends.items() if name != kind and getattr(info, "options", None) is not None
                    and key in {f.name for f in attrs.fields(info.options)})
    if owners:
        return f"; it is a key of {' and '.join(repr(o) for o in owners)} clusters: remove it, or set type: {owners[0]}"
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; `runjob clusters keys {kind}` lists the keys"


def _secret_problem(key: str, where: str, label: str) -> list[str]:
    from runjob_core.redact import SECRET_ENV_VARS

    if key.upper() in SECRET_ENV_VARS or re.search(r"(TOKEN|API_KEY|SECRET|PASSWORD)$", key.upper()):
        return [f"{key} at {where} in {label} would be written into the job script: remove it and set it in the "
                "environment of the machine that runs the job (or log in there, e.g. `huggingface-cli login`)"]
    return []


def _check_cluster(cluster: ClusterConfig, where: str, label: str, info: Any = None) -> list[str]:
    problems = [p for key in cluster.env for p in _secret_problem(key, f"{where}.env.{key}", label)]
    for key in getattr(info, "required_keys", ()):
        if getattr(cluster, key, None) in (None, ""):
            problems.append(f"required key missing at {where}.{key} in {label} (a {cluster.type} cluster needs it)")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", cluster.type):
        problems.append(f"invalid backend type {cluster.type!r} at {where}.type in {label}")
    return problems


# -------------------------------------------------------------------- jobs


def load_job(path: Path) -> JobSpec:
    data = _read_bytes(path)
    source, base_dir = str(path), str(path.parent.resolve())
    from runjob_core.config import cache as _spec_cache
    return _spec_cache.cached(
        "job", data, f"{source}\0{base_dir}",
        lambda: job_from_mapping(_parse_yaml(data, source), source=source, base_dir=base_dir),
    )


def job_from_mapping(raw: Any, *, source: str, base_dir: str = ".") -> JobSpec:
    if raw is None:
        raise ConfigError(source, [f"{source} is empty: a job needs at least 'name:' and 'command:'"])
    if isinstance(raw, Mapping):
        for internal in ("source", "base_dir"):
            if internal in raw:
                raise ConfigError(source, [f"unknown key '{internal}' at $ in {source}"])
        if "sweep" in raw:
            raise ConfigError(source, [f"{source} is a sweep (a 'sweep:' key at $): runjob plan, submit and run take it "
                                       "whole; status, report, cancel and resume take the sweep's name"])
        from runjob_core.config import guard as _input_guard
        leaked = _input_guard.token_problems(raw, source)
        if leaked:
            raise ConfigError(source, leaked)
        raw = {**raw, "source": source, "base_dir": base_dir}
    job = structure(raw, JobSpec, source=source)
    problems = _check_job(job, source)
    if problems:
        raise ConfigError(source, problems)
    return job


def _check_job(job: JobSpec, label: str) -> list[str]:
    problems = []
    if not JOB_NAME_RE.fullmatch(job.name):
        problems.append(
            f"invalid job name {job.name!r} at $.name in {label}: use letters, digits, '.', '_' and '-' "
            "(it becomes a file name and a scheduler job name)"
        )
    if job.model.engine is not None and job.model.engine not in ("vllm", "hf", "sglang"):
        problems.append(f"unknown engine {job.model.engine!r} at $.model.engine in {label}; engines: vllm, hf, sglang")
    if job.template not in TEMPLATES:
        problems.append(f"unknown template {job.template!r} at $.template in {label}; templates: {', '.join(TEMPLATES)}")
    for key, value in (("resources.time", job.resources.time), ("canary.time", job.canary.time),
                       ("model.startup_timeout", job.model.startup_timeout)):
        if value is not None:
            try:
                parse_duration(value)
            except ValueError:
                problems.append(f"invalid duration {value!r} at $.{key} in {label}: use minutes, HH:MM:SS, D-HH:MM:SS or 2h/30m")
    for key, value in (("checkpoint.every", job.checkpoint.every), ("upload.every", job.upload.every)):
        if value is not None and not re.fullmatch(r"\d+\s*(rows|steps)?|\d+(\.\d+)?\s*[smhd]", value.strip()):
            problems.append(f"invalid interval {value!r} at $.{key} in {label}: use 10m, 1h or a count like 500 rows")
    if job.resources.mem is not None and not _MEM_RE.fullmatch(job.resources.mem):
        problems.append(f"invalid memory {job.resources.mem!r} at $.resources.mem in {label}: use e.g. 16G or 500M")
    for key, value in (("resources.gpus", job.resources.gpus), ("resources.cpus", job.resources.cpus), ("resources.nodes", job.resources.nodes)):
        if value < 0 or (key != "resources.gpus" and value == 0):
            problems.append(f"invalid count {value} at $.{key} in {label}")
    if job.health.gpu_sample_seconds < 0 or job.health.gpu_idle_minutes <= 0:
        key, value = (("health.gpu_sample_seconds", job.health.gpu_sample_seconds) if job.health.gpu_sample_seconds < 0
                      else ("health.gpu_idle_minutes", job.health.gpu_idle_minutes))
        problems.append(f"invalid value {value} at $.{key} in {label}: use a positive number (gpu_sample_seconds: 0 turns "
                        "GPU telemetry off)")
    for key in job.env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append(f"invalid environment variable name {key!r} at $.env in {label}")
        problems.extend(_secret_problem(key, f"$.env.{key}", label))
    if not job.command.strip():
        problems.append(f"empty command at $.command in {label}")
    from runjob_core.config.serving import serving_problems

    problems.extend(serving_problems(job, label))
    if "RUNJOB_COMMAND_END" in job.command.splitlines():
        problems.append(f"the line RUNJOB_COMMAND_END at $.command in {label} is reserved by the training template")
    return problems


#: Fields that describe where/how a spec was read, not the experiment.
_NOT_HASHED = ("source", "base_dir")
#: Keys added after 0.1, left out of the hash while they hold their default, so stored jobs
#: keep their hash: (section, key, default).
_ADDED_LATER = (("model", "engine", None), ("model", "max_tokens_reason", None), ("model", "serve", True),
                ("model", "serve_args", ()), ("model", "startup_timeout", None),
                ("health", "gpu_sample_seconds", 30), ("health", "gpu_idle_minutes", 15.0))


def spec_hash(job: JobSpec) -> str:
    """A stable hash of the experiment: resuming or re-running never changes it silently."""
    return _hash_of(unstructure(job))


def spec_json_and_hash(job: JobSpec) -> tuple[str, str]:
    """``(job_to_json(job), spec_hash(job))`` from one unstructure: what a submit stores."""
    data = unstructure(job)
    return json.dumps(data, sort_keys=True), _hash_of(data)


def _hash_of(data: dict[str, Any]) -> str:
    """The spec hash of *data* (a job unstructured; changed in place)."""
    for key in _NOT_HASHED:
        data.pop(key, None)
    for section, key, default in _ADDED_LATER:
        if data.get(section, {}).get(key, default) == default:
            data[section].pop(key, None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def job_to_json(job: JobSpec) -> str:
    return json.dumps(unstructure(job), sort_keys=True)


def job_from_json(text: str) -> JobSpec:
    from runjob_core.config.converter import from_plain

    return from_plain(json.loads(text), JobSpec)


def record_to_json(obj: Any) -> str:
    return json.dumps(unstructure(obj), sort_keys=True)


def plain_json(value: Any) -> bool:
    """Whether *value* is JSON's own data (strings, numbers, booleans, None, lists, tuples,
    mappings with string keys), which ``attrs.asdict`` copies without changing what JSON
    makes of it (a tuple is written as a list either way)."""
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return True
    if kind in (list, tuple):
        return all(map(plain_json, value))
    if kind is dict:
        return all(type(k) is str and plain_json(v) for k, v in value.items())
    return False


def record_from_json(text: str, cls: type[T]) -> T:
    from runjob_core.config.converter import from_plain

    return from_plain(json.loads(text), cls)
