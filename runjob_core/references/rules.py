"""The rules of a benchmark reference: their validation (front matter and each rule) and
how they are checked against a job spec. The file format and the rule language are
documented in :mod:`runjob_core.references`, the public face that re-exports these."""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from attrs import frozen

from runjob_core.config import describe_value
from runjob_core.errors import ConfigError
from runjob_core.models import JobSpec, Reference

FRONT_MATTER_KEYS = (
    "name", "aliases", "description", "tags", "dataset", "sources", "scoring", "prompt_format",
    "num_fewshot", "expected_max_tokens", "expected_score", "rules",
)
CHECK_KEYS = ("equals", "one_of", "min", "max", "matches", "required")
RULE_KEYS = ("path", *CHECK_KEYS, "severity", "why", "fix", "when")
SEVERITIES = ("error", "warning")

#: JobSpec fields that describe where a spec came from, not the experiment.
_NOT_SPEC = ("source", "base_dir")


@functools.lru_cache(maxsize=1)
def _spec_layout() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...], tuple[str, ...]]:
    """What a rule path may name, read from JobSpec itself: ``(records, dicts, scalars)``,
    records mapping a field (``model``) to its sub-fields (``max_tokens``, ...)."""
    records: dict[str, tuple[str, ...]] = {}
    dicts: list[str] = []
    scalars: list[str] = []
    for field in attrs.fields(JobSpec):
        if field.name in _NOT_SPEC:
            continue
        default = field.default
        if attrs.has(type(default)):
            records[field.name] = tuple(f.name for f in attrs.fields(type(default)))
        elif isinstance(default, attrs.Factory) and default.factory is dict:
            dicts.append(field.name)
        else:
            scalars.append(field.name)
    return records, tuple(dicts), tuple(scalars)


@frozen
class RuleResult:
    """One rule of a reference applied to one job spec."""

    reference: str
    #: The rule's path as written (``a|b`` for a list of paths).
    path: str
    ok: bool
    severity: str  # "error" | "warning"
    #: What was found and, when it failed, the fix.
    message: str
    #: The pitfall the rule guards against.
    why: str
    value: Any = None

    @property
    def failed_error(self) -> bool:
        return not self.ok and self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


# --------------------------------------------------------------------------- validation




def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (isinstance(value, float) and math.isnan(value))


def _unknown(key: str, known: Sequence[str], where: str, label: str) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
    return f"unknown key {key!r} at {where} in {label}{hint}"


def _string_list(value: Any, where: str, label: str, problems: list[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        problems.append(f"expected a list of strings at {where} in {label}, got {describe_value(value)}")
        return ()
    return tuple(str(v).strip() for v in value if str(v).strip())


def validate_front_matter(front: Mapping[str, Any], label: str) -> dict[str, Any]:
    """Check the front matter of a reference; return it normalised (rules validated).

    :raises ConfigError: every problem, each naming *label* and the key path.
    """
    problems: list[str] = []
    meta: dict[str, Any] = {}
    for key, value in front.items():
        key = str(key)
        where = f"$.{key}"
        if key.startswith(("x-", "x_")):
            meta[key] = value
        elif key not in FRONT_MATTER_KEYS:
            problems.append(_unknown(key, FRONT_MATTER_KEYS, "$", label))
        elif key == "name":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not str(value).strip():
                problems.append(f"name must be a non-empty string at {where} in {label}, got {describe_value(value)}")
            else:
                meta["name"] = str(value).strip()
        elif key in ("aliases", "tags", "sources"):
            meta[key] = _string_list(value if value is not None else [], where, label, problems)
        elif key in ("description", "dataset", "scoring", "prompt_format"):
            if value is not None and not isinstance(value, str):
                problems.append(f"expected a string at {where} in {label}, got {describe_value(value)}")
            else:
                meta[key] = (value or "").strip()
        elif key == "num_fewshot":
            counts = value if isinstance(value, list) else [value]
            if value is not None and not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
                problems.append(f"num_fewshot must be a count, a list of counts or null at {where} in {label}, got {describe_value(value)}")
            else:
                meta[key] = value
        elif key == "expected_max_tokens":
            meta[key] = _max_tokens(value, where, label, problems)
        elif key == "expected_score":
            meta[key] = _expected_score(value, where, label, problems)
        elif key == "rules":
            meta[key] = validate_rules(value, label, problems=problems)
    if "name" not in meta and not any(p.startswith("name ") for p in problems):
        problems.append(f"required key missing at $.name in {label} (the benchmark's name)")
    if problems:
        raise ConfigError(label, problems)
    return meta


def _max_tokens(value: Any, where: str, label: str, problems: list[str]) -> Any:
    def ok(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if value is None or ok(value):
        return value
    if isinstance(value, Mapping):
        for key, v in value.items():
            if not ok(v):
                problems.append(f"expected a positive token count at {where}.{key} in {label}, got {describe_value(v)}")
        return {str(k): v for k, v in value.items()}
    problems.append(f"expected_max_tokens must be a positive integer or a mapping like "
                    f"{{non_reasoning: 2048, reasoning: 32768}} at {where} in {label}, got {describe_value(value)}")
    return None


def _expected_score(value: Any, where: str, label: str, problems: list[str]) -> Any:
    """``{min: 0, max: 1, chance: 0.25}``: the range a per-row score can take, and what
    guessing scores (the report flags a mean below it: broken answer extraction)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"min", "max", "chance"}:
        problems.append(f"expected_score must be a mapping with min, max and chance at {where} in {label}, "
                        f"got {describe_value(value)}")
        return None
    out = {}
    for key, v in value.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            problems.append(f"expected a number at {where}.{key} in {label}, got {describe_value(v)}")
        else:
            out[str(key)] = float(v)
    if "min" in out and "max" in out and out["min"] > out["max"]:
        problems.append(f"expected_score.min is above expected_score.max at {where} in {label}")
    return out


def validate_rules(rules: Any, label: str, *, problems: list[str] | None = None) -> tuple[dict[str, Any], ...]:
    """Validate a ``rules:`` list; return the rules normalised (``severity`` filled in).

    With *problems* given, problems are appended to it; otherwise they raise ConfigError.
    """
    collect = problems if problems is not None else []
    out: list[dict[str, Any]] = []
    if rules is None:
        rules = []
    if not isinstance(rules, (list, tuple)):
        collect.append(f"expected a list of rules at $.rules in {label}, got {describe_value(rules)}")
    else:
        for index, rule in enumerate(rules):
            checked = _validate_rule(rule, f"$.rules[{index}]", label, collect)
            if checked is not None:
                out.append(checked)
    if problems is None and collect:
        raise ConfigError(label, collect)
    return tuple(out)


def _validate_rule(rule: Any, where: str, label: str, problems: list[str], *, condition: bool = False) -> dict[str, Any] | None:
    if not isinstance(rule, Mapping):
        problems.append(f"expected a mapping at {where} in {label}, got {describe_value(rule)}")
        return None
    allowed = ("path", *CHECK_KEYS) if condition else RULE_KEYS
    before = len(problems)
    out: dict[str, Any] = {}
    for key in rule:
        if str(key) not in allowed:
            problems.append(_unknown(str(key), allowed, where, label))
    if "path" not in rule:
        problems.append(f"required key missing at {where}.path in {label} (where in the job spec to look, e.g. params.num_fewshot)")
    else:
        out["path"] = _validate_path(rule["path"], f"{where}.path", label, problems)
    if not any(k in rule for k in CHECK_KEYS):
        problems.append(f"no check at {where} in {label}: give one of {', '.join(CHECK_KEYS)}")
    if "equals" in rule:
        if isinstance(rule["equals"], (dict, list)):
            problems.append(f"equals must be a single value at {where}.equals in {label}, got {describe_value(rule['equals'])}")
        out["equals"] = rule["equals"]
    if "one_of" in rule:
        value = rule["one_of"]
        if not isinstance(value, list) or not value or any(isinstance(v, (dict, list)) for v in value):
            problems.append(f"one_of must be a non-empty list of values at {where}.one_of in {label}, got {describe_value(value)}")
        out["one_of"] = value
    for key in ("min", "max"):
        if key in rule:
            if not _is_number(rule[key]):
                problems.append(f"{key} must be a number at {where}.{key} in {label}, got {describe_value(rule[key])}")
            out[key] = rule[key]
    if _is_number(rule.get("min")) and _is_number(rule.get("max")) and rule["min"] > rule["max"]:
        problems.append(f"min {rule['min']} is above max {rule['max']} at {where} in {label}")
    if "matches" in rule:
        pattern = rule["matches"]
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"matches must be a regular expression (a string) at {where}.matches in {label}, got {describe_value(pattern)}")
        else:
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"invalid regular expression at {where}.matches in {label}: {exc}")
        out["matches"] = pattern
    if "required" in rule:
        if not isinstance(rule["required"], bool):
            problems.append(f"required must be true or false at {where}.required in {label}, got {describe_value(rule['required'])}")
        elif not rule["required"] and not any(k in rule for k in CHECK_KEYS if k != "required"):
            problems.append(f"no check at {where} in {label}: 'required: false' checks nothing")
        out["required"] = rule["required"]
    if condition:
        return out if len(problems) == before else None
    severity = rule.get("severity", "error")
    if severity not in SEVERITIES:
        problems.append(f"severity must be 'error' or 'warning' at {where}.severity in {label}, got {describe_value(severity)}")
    out["severity"] = severity
    why = rule.get("why")
    if not isinstance(why, str) or not why.strip():
        problems.append(f"required key missing at {where}.why in {label} (one line naming the pitfall the rule guards against)"
                        if why is None else f"why must be a string at {where}.why in {label}, got {describe_value(why)}")
    else:
        out["why"] = " ".join(why.split())
    if "fix" in rule:
        if not isinstance(rule["fix"], str) or not rule["fix"].strip():
            problems.append(f"fix must be a string at {where}.fix in {label}, got {describe_value(rule['fix'])}")
        else:
            out["fix"] = " ".join(rule["fix"].split())
    if "when" in rule:
        when = rule["when"]
        conditions = when if isinstance(when, list) else [when]
        if isinstance(when, list) and not when:
            problems.append(f"when must not be empty at {where}.when in {label}")
        checked = []
        for index, cond in enumerate(conditions):
            sub = f"{where}.when[{index}]" if isinstance(when, list) else f"{where}.when"
            result = _validate_rule(cond, sub, label, problems, condition=True)
            if result is not None:
                checked.append(result)
        out["when"] = checked
    return out if len(problems) == before else None


def _validate_path(value: Any, where: str, label: str, problems: list[str]) -> str | list[str]:
    paths = value if isinstance(value, list) else [value]
    if not paths or not all(isinstance(p, str) for p in paths):
        problems.append(f"path must be a dotted path (or a list of them) at {where} in {label}, got {describe_value(value)}")
        return value
    for path in paths:
        problem = _path_problem(path)
        if problem:
            message, hint = problem
            problems.append(f"{message} at {where} in {label}{hint}")
    return value


def _path_problem(path: str) -> tuple[str, str] | None:
    """``(message, hint)`` when *path* cannot point into a job spec, else None."""
    parts = path.split(".")
    if not path or any(not re.fullmatch(r"[A-Za-z0-9_\-]+", p) for p in parts):
        return f"invalid path {path!r}", "; use dotted names like params.num_fewshot"
    root, rest = parts[0], parts[1:]
    records, dicts, scalars = _spec_layout()
    roots = (*scalars, *records, *dicts)
    if root not in roots:
        close = difflib.get_close_matches(root, roots, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; the job spec has {', '.join(roots)}"
        return f"unknown job spec field {root!r} in path {path!r}", hint
    if root in records:
        fields = records[root]
        if len(rest) != 1:
            return f"path {path!r} must name one field of {root}", f"; {root} has {', '.join(fields)}"
        if rest[0] not in fields:
            close = difflib.get_close_matches(rest[0], fields, n=1)
            hint = f"; did you mean '{root}.{close[0]}'?" if close else f"; {root} has {', '.join(fields)}"
            return f"unknown field {rest[0]!r} of {root} in path {path!r}", hint
    elif root in dicts:
        if not rest:
            return f"path {path!r} must name a key of {root}", f"; e.g. {root}.num_fewshot" if root == "params" else ""
    elif rest:
        return f"{root} has no fields in path {path!r}", f"; use just {root!r}"
    return None


# --------------------------------------------------------------------------- checking


_MISSING = object()


def _lookup(job: JobSpec, path: str) -> Any:
    current: Any = job
    for part in path.split("."):
        if isinstance(current, Mapping):
            current = current.get(part, _MISSING)
        elif attrs.has(type(current)):
            current = getattr(current, part, _MISSING)
        else:
            return _MISSING
        if current is _MISSING or current is None:
            return _MISSING
    if current == "" or current == ():
        return _MISSING
    return current


def _resolve(job: JobSpec, path: str | list[str]) -> Any:
    for one in path if isinstance(path, list) else [path]:
        value = _lookup(job, one)
        if value is not _MISSING:
            return value
    return _MISSING


def path_label(path: str | list[str]) -> str:
    return "|".join(path) if isinstance(path, list) else path


def _number(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _same(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return float(a) == float(b)
    return a == b


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def expectation(rule: Mapping[str, Any]) -> str:
    """What a rule's checks accept, in words: "one of 0, 5, 8", "at least 2048"."""
    return _expectation(rule)


def describe_rule(rule: Mapping[str, Any]) -> str:
    """One line for people: ``model.max_tokens: at least 2048 [warning] when ... — why``."""
    label = path_label(rule["path"])
    required = "required, " if rule.get("required") else ""
    checks = _expectation(rule) if any(k in rule for k in CHECK_KEYS if k != "required") else "set"
    when = ""
    if rule.get("when"):
        conditions = rule["when"] if isinstance(rule["when"], list) else [rule["when"]]
        when = " when " + " or ".join(
            f"{path_label(c['path'])} is set" if set(c) <= {"path", "required"}
            else f"{path_label(c['path'])} is {_expectation(c)}" for c in conditions)
    return f"{label}: {required}{checks} [{rule.get('severity', 'error')}]{when} — {rule.get('why', '')}"


def _expectation(rule: Mapping[str, Any]) -> str:
    parts = []
    if "equals" in rule:
        parts.append(_fmt(rule["equals"]))
    if "one_of" in rule:
        parts.append("one of " + ", ".join(_fmt(v) for v in rule["one_of"]))
    if "min" in rule and "max" in rule:
        parts.append(f"between {_fmt(rule['min'])} and {_fmt(rule['max'])}")
    elif "min" in rule:
        parts.append(f"at least {_fmt(rule['min'])}")
    elif "max" in rule:
        parts.append(f"at most {_fmt(rule['max'])}")
    if "matches" in rule:
        parts.append(f"a value matching /{rule['matches']}/")
    return " and ".join(parts) or "a value"


def _default_fix(rule: Mapping[str, Any], label: str) -> str:
    if "equals" in rule:
        return f"set {label} to {_fmt(rule['equals'])}"
    if "one_of" in rule:
        return f"set {label} to one of {', '.join(_fmt(v) for v in rule['one_of'])}"
    if "min" in rule and "max" in rule:
        return f"set {label} between {_fmt(rule['min'])} and {_fmt(rule['max'])}"
    if "min" in rule:
        return f"raise {label} to at least {_fmt(rule['min'])}"
    if "max" in rule:
        return f"lower {label} to at most {_fmt(rule['max'])}"
    if "matches" in rule:
        return f"change {label} to match /{rule['matches']}/"
    return f"set {label} in the job spec"


def _failed_check(rule: Mapping[str, Any], value: Any) -> str | None:
    """Which check *value* fails ("equals", "min", ...), or None when it passes them all."""
    if "equals" in rule and not _same(value, rule["equals"]):
        return "equals"
    if "one_of" in rule and not any(_same(value, v) for v in rule["one_of"]):
        return "one_of"
    for key in ("min", "max"):
        if key in rule:
            number = _number(value)
            if number is None:
                return "number"
            if (key == "min" and number < rule[key]) or (key == "max" and number > rule[key]):
                return key
    if "matches" in rule:
        text = _fmt(value) if not isinstance(value, str) else value
        if re.search(rule["matches"], text) is None:
            return "matches"
    return None


def _condition_holds(job: JobSpec, condition: Mapping[str, Any]) -> bool:
    value = _resolve(job, condition["path"])
    return value is not _MISSING and _failed_check(condition, value) is None


def rule_applies(rule: Mapping[str, Any], job: JobSpec) -> bool:
    """Whether *rule*'s ``when`` (if any) holds for *job*."""
    conditions = rule.get("when")
    if not conditions:
        return True
    if isinstance(conditions, Mapping):
        conditions = [conditions]
    return any(_condition_holds(job, c) for c in conditions)


def check_rule(rule: Mapping[str, Any], job: JobSpec, *, reference: str = "") -> RuleResult | None:
    """Apply one validated rule; ``None`` when its ``when`` does not hold."""
    if not rule_applies(rule, job):
        return None
    label = path_label(rule["path"])
    severity = rule.get("severity", "error")
    why = rule.get("why", "")
    fix = rule.get("fix") or _default_fix(rule, label)
    value = _resolve(job, rule["path"])
    expected = _expectation(rule)
    if value is _MISSING:
        if rule.get("required"):
            detail = f"; the reference requires {expected}" if expected != "a value" else "; the reference requires it"
            return RuleResult(reference, label, False, severity, f"{label} is not set{detail}: {fix}", why)
        return RuleResult(reference, label, False, "warning", f"{label} is not set; the reference expects {expected}: {fix}", why)
    failed = _failed_check(rule, value)
    if failed is None:
        return RuleResult(reference, label, True, severity, f"{label} = {_fmt(value)}", why, value)
    if failed == "number":
        message = f"{label} is {_fmt(value)}, not a number; the reference expects {expected}: {fix}"
    else:
        message = f"{label} is {_fmt(value)}; the reference expects {expected}: {fix}"
    return RuleResult(reference, label, False, severity, message, why, value)


def check_rules(reference: Reference, job: JobSpec) -> list[RuleResult]:
    """Apply every rule of *reference* to *job*, in order (rules whose ``when`` fails are left out).

    The rules are validated first (a plugin may build references in code).

    :raises ConfigError: a rule is malformed.
    """
    rules = validate_rules(list(reference.rules), reference.path or f"reference {reference.name!r} from {reference.source}")
    return [r for r in (check_rule(rule, job, reference=reference.name) for rule in rules) if r is not None]
