"""Loading ``clusters.yaml`` and ``job.yaml`` into frozen records.

One private cattrs converter, strict about types and unknown keys. Every problem becomes
one line that names the file and the key path (``unknown key 'resourcs' at $ in
job.yaml``); all problems of a file are reported together, without a traceback.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from runjob_core.errors import ConfigError
from runjob_core.models import JOB_NAME_RE, ClusterConfig, JobSpec

T = TypeVar("T")

CLUSTER_FILE = "clusters.yaml"
#: Folders searched for clusters.yaml, in order (the seed skill kept it in .raca/).
PROJECT_DIRS = (".runjob", ".raca")
BACKEND_TYPES_HINT = {"slurm": "runjob-slurm", "runpod": "runjob-runpod", "local": "runjob-local"}
TEMPLATES = ("base", "training", "vllm")


class _ValueProblem(ValueError):
    """A value of the right shape but not acceptable; its text is shown as is."""


def _strict_str(value: Any, _type: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _ValueProblem(f"expected a string, got {describe_value(value)}")


def _strict_int(value: Any, _type: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _ValueProblem(f"expected an integer, got {describe_value(value)}")


def _strict_float(value: Any, _type: type) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _ValueProblem(f"expected a number, got {describe_value(value)}")


def _strict_bool(value: Any, _type: type) -> bool:
    if isinstance(value, bool):
        return value
    raise _ValueProblem(f"expected true or false, got {describe_value(value)}")


def _str_tuple(value: Any, _type: type) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(_strict_str(v, str) for v in value)
    raise _ValueProblem(f"expected a list of strings, got {describe_value(value)}")


def _str_dict(value: Any, _type: type) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _ValueProblem(f"expected a mapping, got {describe_value(value)}")
    return {str(k): _strict_str(v, str) for k, v in value.items()}


def _any_dict(value: Any, _type: type) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _ValueProblem(f"expected a mapping, got {describe_value(value)}")
    return {str(k): v for k, v in value.items()}


def describe_value(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, (dict, list)):
        return f"a {type(value).__name__}"
    return repr(value)


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook(bool, _strict_bool)
    # Generic aliases are not classes: match them with predicates.
    converter.register_structure_hook_func(lambda t: t == tuple[str, ...], _str_tuple)
    converter.register_structure_hook_func(lambda t: t == dict[str, str], _str_dict)
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _any_dict)
    return converter


_converter = _make_converter()


def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        return "unknown key " + ", ".join(repr(k) for k in sorted(exc.extra_fields))
    if isinstance(exc, _ValueProblem):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, (TypeError, ValueError)) and type_ is not None:
        name = getattr(type_, "__name__", str(type_))
        return f"invalid value, expected {name}"
    return cattrs.v.format_exception(exc, type_)


def structure(raw: Any, cls: type[T], *, source: str, path: str = "$") -> T:
    """Structure *raw* into *cls*, reporting every problem with its full key path."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, [f"expected a mapping at {path} in {source}, got {describe_value(raw)}"])
    try:
        return _converter.structure(dict(raw), cls)
    except (ClassValidationError, IterableValidationError) as exc:
        problems = []
        for line in cattrs.transform_error(exc, path=path, format_exception=_format_exception):
            message, _, where = line.rpartition(" @ ")
            problems.append(f"{message} at {where} in {source}{_hint(message, '$' + where[len(path):], cls)}" if where else line)
        raise ConfigError(source, problems) from None


def _hint(message: str, where: str, cls: type) -> str:
    match = re.match(r"unknown key '([^']+)'$", message)
    if not match:
        return ""
    known = _known_keys_at(cls, where)
    close = difflib.get_close_matches(match.group(1), known, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return f"; known keys: {', '.join(known)}" if known else ""


def _known_keys_at(cls: type, where: str) -> list[str]:
    current: Any = cls
    for part in [p for p in where.split(".")[1:] if p]:
        if not attrs.has(current):
            return []
        fields = {f.name: f for f in attrs.fields(current)}
        if part not in fields:
            return []
        current = fields[part].type
    if not attrs.has(current):
        return []
    return [f.name for f in attrs.fields(current) if f.name not in ("source", "base_dir", "name")]


def unstructure(obj: Any) -> Any:
    return _converter.unstructure(obj)


# -------------------------------------------------------------------- YAML files


#: libyaml's parser when PyYAML has it: about 10x faster than the pure-Python one.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader


def read_yaml(path: Path) -> Any:
    label = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(label, [f"{label}: file not found"]) from None
    except OSError as exc:
        raise ConfigError(label, [f"{label}: cannot read ({exc.strerror})"]) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(label, [f"YAML syntax error in {label}{where}: {problem}"]) from None


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


def load_clusters(path: Path | None = None) -> dict[str, ClusterConfig]:
    """All configured clusters, plus the built-in ``local`` one unless the file defines it."""
    path = path if path is not None else find_clusters_file()
    clusters = {"local": local_cluster()}
    if path is None:
        return clusters
    label = str(path)
    raw = read_yaml(path)
    if raw is None:
        return clusters
    if not isinstance(raw, Mapping) or set(raw) - {"clusters"}:
        extra = sorted(set(raw) - {"clusters"}) if isinstance(raw, Mapping) else []
        what = f"unknown key {', '.join(repr(k) for k in extra)} at $" if extra else "expected a mapping with 'clusters:' at $"
        raise ConfigError(label, [f"{what} in {label} (the file holds one key, 'clusters:')"])
    entries = raw.get("clusters") or {}
    if not isinstance(entries, Mapping):
        raise ConfigError(label, [f"expected a mapping of cluster names at $.clusters in {label}, got {describe_value(entries)}"])
    problems: list[str] = []
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
        try:
            cluster = structure({**entry, "name": str(name), "source": label}, ClusterConfig, source=label, path=where)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        problems.extend(_check_cluster(cluster, where, label))
        clusters[str(name)] = cluster
    if problems:
        raise ConfigError(label, problems)
    return clusters


def _secret_problem(key: str, where: str, label: str) -> list[str]:
    from runjob_core.redact import SECRET_ENV_VARS

    if key.upper() in SECRET_ENV_VARS or re.search(r"(TOKEN|API_KEY|SECRET|PASSWORD)$", key.upper()):
        return [f"{key} at {where} in {label} would be written into the job script: remove it and set it in the "
                "environment of the machine that runs the job (or log in there, e.g. `huggingface-cli login`)"]
    return []


def _check_cluster(cluster: ClusterConfig, where: str, label: str) -> list[str]:
    problems = [p for key in cluster.env for p in _secret_problem(key, f"{where}.env.{key}", label)]
    if cluster.gres_format not in ("typed", "generic"):
        problems.append(f"gres_format must be 'typed' or 'generic', not {cluster.gres_format!r} at {where}.gres_format in {label}")
    if cluster.type in ("slurm", "runpod") and cluster.type == "slurm" and not cluster.host:
        problems.append(f"required key missing at {where}.host in {label} (a slurm cluster needs the login host)")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", cluster.type):
        problems.append(f"invalid backend type {cluster.type!r} at {where}.type in {label}")
    return problems


# -------------------------------------------------------------------- jobs


def load_job(path: Path) -> JobSpec:
    raw = read_yaml(path)
    return job_from_mapping(raw, source=str(path), base_dir=str(path.parent.resolve()))


def job_from_mapping(raw: Any, *, source: str, base_dir: str = ".") -> JobSpec:
    if raw is None:
        raise ConfigError(source, [f"{source} is empty: a job needs at least 'name:' and 'command:'"])
    if isinstance(raw, Mapping):
        for internal in ("source", "base_dir"):
            if internal in raw:
                raise ConfigError(source, [f"unknown key '{internal}' at $ in {source}"])
        raw = {**raw, "source": source, "base_dir": base_dir}
    job = structure(raw, JobSpec, source=source)
    problems = _check_job(job, source)
    if problems:
        raise ConfigError(source, problems)
    return job


def _check_job(job: JobSpec, label: str) -> list[str]:
    problems = []
    if not JOB_NAME_RE.match(job.name):
        problems.append(
            f"invalid job name {job.name!r} at $.name in {label}: use letters, digits, '.', '_' and '-' "
            "(it becomes a file name and a scheduler job name)"
        )
    if job.template not in TEMPLATES:
        problems.append(f"unknown template {job.template!r} at $.template in {label}; templates: {', '.join(TEMPLATES)}")
    for key, value in (("resources.time", job.resources.time), ("canary.time", job.canary.time)):
        if value is not None:
            try:
                parse_duration(value)
            except ValueError:
                problems.append(f"invalid duration {value!r} at $.{key} in {label}: use minutes, HH:MM:SS, D-HH:MM:SS or 2h/30m")
    for key, value in (("checkpoint.every", job.checkpoint.every), ("upload.every", job.upload.every)):
        if value is not None and not re.fullmatch(r"\d+\s*(rows|steps)?|\d+(\.\d+)?\s*[smhd]", value.strip()):
            problems.append(f"invalid interval {value!r} at $.{key} in {label}: use 10m, 1h or a count like 500 rows")
    if job.resources.mem is not None and not _MEM_RE.match(job.resources.mem):
        problems.append(f"invalid memory {job.resources.mem!r} at $.resources.mem in {label}: use e.g. 16G or 500M")
    for key, value in (("resources.gpus", job.resources.gpus), ("resources.cpus", job.resources.cpus), ("resources.nodes", job.resources.nodes)):
        if value < 0 or (key != "resources.gpus" and value == 0):
            problems.append(f"invalid count {value} at $.{key} in {label}")
    for key in job.env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            problems.append(f"invalid environment variable name {key!r} at $.env in {label}")
        problems.extend(_secret_problem(key, f"$.env.{key}", label))
    if not job.command.strip():
        problems.append(f"empty command at $.command in {label}")
    if "RUNJOB_COMMAND_END" in job.command.splitlines():
        problems.append(f"the line RUNJOB_COMMAND_END at $.command in {label} is reserved by the training template")
    return problems


#: Fields that describe where/how a spec was read, not the experiment.
_NOT_HASHED = ("source", "base_dir")


def spec_hash(job: JobSpec) -> str:
    """A stable hash of the experiment: resuming or re-running never changes it silently."""
    data = unstructure(job)
    for key in _NOT_HASHED:
        data.pop(key, None)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def job_to_json(job: JobSpec) -> str:
    return json.dumps(unstructure(job), sort_keys=True)


def job_from_json(text: str) -> JobSpec:
    return _converter.structure(json.loads(text), JobSpec)


def record_to_json(obj: Any) -> str:
    return json.dumps(unstructure(obj), sort_keys=True)


def record_from_json(text: str, cls: type[T]) -> T:
    return _converter.structure(json.loads(text), cls)
