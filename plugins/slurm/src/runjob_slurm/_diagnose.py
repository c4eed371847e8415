"""Why SLURM said no, in one sentence with the fix.

Pure functions, standard library only. The texts matched are SLURM 22.05's (recorded in
``tests/data/sbatch_*.txt``); unknown text is passed on verbatim.

``requested`` (all keys optional): partition, account, qos, time ("2h", "90", "1-00:00:00"),
mem ("16G"), cpus, nodes, gpus, gpu_type. ``partitions``: names, or records with the
attributes of ``_parse.PartitionInfo`` (name, state, max_time, cpus, mem_mb, gres, default).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

# --------------------------------------------------------------------- helper commands


def accounts_argv(user: str) -> list[str]:
    """The user's associations: ``account|partition`` lines (partition empty = any)."""
    return ["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=account,partition"]


def parse_accounts(text: str) -> list[str]:
    """``accounts_argv`` output -> account names, in order, without repeats."""
    names = [line.split("|", 1)[0].strip() for line in text.splitlines()]
    return list(dict.fromkeys(name for name in names if name))


# --------------------------------------------------------------------- small parsers


class _Part:
    def __init__(self, item: Any):
        if isinstance(item, str):
            item = {"name": item.rstrip("*"), "default": item.endswith("*")}
        get = item.get if isinstance(item, dict) else lambda key, default=None: getattr(item, key, default)
        self.name: str = get("name")
        self.state: str = get("state") or "up"
        self.max_time: int | None = get("max_time")
        self.cpus: int | None = get("cpus")
        self.mem_mb: int | None = get("mem_mb")
        self.gres: tuple[str, ...] = tuple(get("gres") or ())
        self.default: bool = bool(get("default", False))

    def label(self) -> str:
        notes = [n for n, on in (("default", self.default), (self.state, self.state not in ("up", ""))) if on]
        return f"{self.name} ({', '.join(notes)})" if notes else self.name


def _seconds(value: Any) -> int | None:
    """A requested time -> seconds: SLURM forms (a bare number is minutes) or 90s/30m/2h/1d."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 60)
    text = str(value or "").strip()
    if match := re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text):
        return int(float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)])
    if not (match := re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)):
        return None
    days, a, b, c = (int(g) if g else None for g in match.groups())
    if days is not None:
        return days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    if c is not None:
        return a * 3600 + b * 60 + c
    return a * 60 + (b or 0)


def _megabytes(value: Any) -> int | None:
    """"16G", "150M", "1T", "500" (MB) -> MB."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", str(value or "").strip(), re.IGNORECASE)
    if not match:
        return None
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def _hms(seconds: int | None) -> str:
    if seconds is None:
        return "no limit"
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _gpus_of(gres: Iterable[str]) -> dict[str, int]:
    """("gpu:h100:2", "gpu:4") -> {"h100": 2, "": 4}."""
    found: dict[str, int] = {}
    for item in gres:
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        count = int(parts[-1]) if parts[-1].isdigit() else 1
        kind = parts[1] if len(parts) == 3 or (len(parts) == 2 and not parts[1].isdigit()) else ""
        found[kind] = max(found.get(kind, 0), count)
    return found


# --------------------------------------------------------------------- sbatch rejections


def diagnose(sbatch_stderr: str, test_only_stderr: str | None, *, cluster_name: str,
             partitions: list | None, accounts: list[str] | None, requested: dict) -> str:
    """sbatch's (and ``sbatch --test-only``'s) stderr -> one message naming the problem and the fix."""
    text = f"{sbatch_stderr}\n{test_only_stderr or ''}"
    low = text.lower()
    parts = [_Part(p) for p in partitions or []]
    req = dict(requested or {})
    default = next((p for p in parts if p.default), None)
    name = req.get("partition") or (default.name if default else None)
    part = next((p for p in parts if p.name == name), None)
    where = f"partition '{name}'" if req.get("partition") else f"the default partition '{name}'" if name else "the partition"
    listing = ", ".join(p.label() for p in parts)
    on = f"on {cluster_name}"

    if "invalid partition" in low:
        bad = req.get("partition") or _after(text, "invalid partition specified:") or "?"
        tail = f"; partitions: {listing}" if listing else ""
        return f"partition '{bad}' does not exist {on}{tail}. Set resources.partition (or the cluster's default_partition) to one of them."
    if "invalid account" in low:
        account = req.get("account")
        what = f"account '{account}' cannot be used with {where}" if account else f"your default account cannot be used with {where}"
        if accounts:
            fix = f"your accounts: {', '.join(accounts)}. Set resources.account (or the cluster's default_account) to one of them."
        elif accounts is not None:
            fix = "you have no SLURM account association there; ask the cluster's admins to add you (sacctmgr add user)."
        else:
            fix = "list yours with: sacctmgr -n -P show assoc user=$USER format=account,partition"
        return f"{what} {on}; {fix}"
    if "invalid qos" in low:
        qos = req.get("qos")
        return (f"QOS '{qos}' is not allowed for your account {on}. Remove resources.qos or use one of your association's "
                f"QOS (sacctmgr -n -P show assoc user=$USER format=account,qos)." if qos else
                f"the default QOS of your account is not allowed in {where} {on}; set resources.qos.")
    if "invalid --time" in low or "invalid time" in low:
        return (f"time '{req.get('time')}' is not a time SLURM understands {on}; write it as minutes, HH:MM:SS or "
                f"D-HH:MM:SS (for example 2:00:00) in resources.time.")
    if "time limit is invalid" in low:
        return _time_message(req, part, parts, where, on)
    if "invalid generic resource" in low:
        return _gres_message(req, parts, on)
    if "memory specification can not be satisfied" in low:
        most = f" (at most {part.mem_mb} MB)" if part and part.mem_mb else ""
        fix = f" to at most {part.mem_mb}M" if part and part.mem_mb else ""
        return f"--mem={req.get('mem')} is more than any node of {where} {on} has{most}. Lower resources.mem{fix}."
    if "requested node configuration is not available" in low or "more processors requested" in low:
        return _node_message(req, part, parts, where, on)
    if "node count specification invalid" in low:
        return f"{where} {on} cannot give {req.get('nodes')} nodes. Lower resources.nodes."
    if "accounting/qos policy" in low or re.search(r"\b(QOS|Assoc)\w*Limit", text):
        limit = re.search(r"\b((?:QOS|Assoc)\w+)", text)
        what = f" ({limit.group(1)})" if limit else ""
        return (f"the job breaks a limit of your account or QOS{what} {on}: too many jobs submitted, or too much "
                f"time/CPUs/GPUs for one job. Ask for less, or wait for your other jobs to finish.")
    if "permission denied" in low or "not permitted to use this partition" in low:
        return f"you may not submit to {where} {on}; partitions: {listing or 'see sinfo'}. Set resources.partition."
    if "unable to contact slurm controller" in low or "socket timed out" in low or "connection refused" in low:
        return f"the SLURM controller {on} did not answer ({_errors(text)}). This is usually temporary: try again later."
    return f"sbatch rejected the job {on}: {_errors(text)}"


def _after(text: str, marker: str) -> str | None:
    for line in text.splitlines():
        head, sep, tail = line.partition(marker)
        if sep:
            return tail.strip() or None
    return None


def _errors(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "failure" in line.lower()]
    return "; ".join(dict.fromkeys(errors or lines)) or "no error text"


def _time_message(req: dict, part: _Part | None, parts: list[_Part], where: str, on: str) -> str:
    asked = _seconds(req.get("time"))
    limit = part.max_time if part else None
    head = f"time {req.get('time')} is longer than {where} allows"
    if limit is not None:
        head += f" ({_hms(limit)})"
    longer = [p.name for p in parts if p.state == "up" and (p.max_time is None or (asked and p.max_time >= asked))]
    fix = f"Lower resources.time to at most {_hms(limit)}" if limit is not None else "Lower resources.time"
    if longer:
        fix += f", or use a partition that allows it: {', '.join(longer)}"
    return f"{head} {on}. {fix}."


def _gres_message(req: dict, parts: list[_Part], on: str) -> str:
    gpus, kind = req.get("gpus") or 0, req.get("gpu_type")
    asked = f"{gpus} x {kind}" if kind else f"{gpus}"
    offers = [f"{p.name}: {', '.join(p.gres)}" for p in parts if p.gres]
    kinds = sorted({k for p in parts for k in _gpus_of(p.gres) if k})
    facts = f"; GRES by partition: {'; '.join(offers)}" if offers else "; no partition offers any GRES"
    fix = f"Set resources.gpu_type to one of: {', '.join(kinds)}" if kinds else "Check resources.gpus/gpu_type"
    return f"the GPU request ({asked}) is not a generic resource (GRES) known {on}{facts}. {fix}."


def _node_message(req: dict, part: _Part | None, parts: list[_Part], where: str, on: str) -> str:
    """"Requested node configuration is not available": name what no node has, and the fix."""
    asked = ", ".join(f"{k}={req[k]}" for k in ("nodes", "cpus", "mem", "gpus", "gpu_type") if req.get(k))
    head = f"no node of {where} {on} can run the job"
    if part is None:
        return f"{head} ({asked or 'as requested'}). Ask for less, or pick another partition."
    gpus, kind, have = int(req.get("gpus") or 0), req.get("gpu_type"), _gpus_of(part.gres)
    problems = []  # (what is wrong, how to fix it)
    if gpus and not have:
        with_gpus = [p.label() for p in parts if _gpus_of(p.gres)]
        problems.append(("it has no GPUs", f"Set resources.partition to a partition with GPUs: {', '.join(with_gpus)}"
                         if with_gpus else "No partition has GPUs"))
    elif gpus and kind and kind not in have:
        problems.append((f"it has no '{kind}' GPUs (only {', '.join(k for k in have if k) or 'untyped ones'})",
                         "Change resources.gpu_type"))
    elif gpus and gpus > (most := have[kind] if kind else max(have.values())):
        problems.append((f"its nodes have at most {most} GPUs and {gpus} were asked for",
                         f"Ask for at most {most} GPUs (resources.gpus)"))
    if req.get("cpus") and part.cpus and int(req["cpus"]) > part.cpus:
        problems.append((f"its nodes have at most {part.cpus} CPUs and {req['cpus']} were asked for",
                         f"Ask for at most {part.cpus} CPUs (resources.cpus)"))
    mem = _megabytes(req.get("mem"))
    if mem and part.mem_mb and mem > part.mem_mb:
        problems.append((f"its nodes have at most {part.mem_mb} MB and mem={req['mem']} was asked for",
                         f"Lower resources.mem to at most {part.mem_mb}M"))
    if problems:
        return f"{head}: {'; '.join(w for w, _ in problems)}. {'. '.join(f for _, f in problems)}."
    node = ", ".join(x for x in (f"{part.cpus} CPUs" if part.cpus else "", f"{part.mem_mb} MB" if part.mem_mb else "",
                                 " ".join(part.gres)) if x)
    return f"{head} ({asked or 'as requested'}; its biggest node: {node or 'unknown'}). Ask for less, or pick another partition."


# --------------------------------------------------------------------- pending reasons

#: Reasons a pending job simply waits out.
ORDINARY_PENDING = frozenset({"None", "Priority", "Resources", "BeginTime", "Dependency", "Reservation", "Licenses",
                              "Prolog", "NodeDown", "JobArrayTaskLimit", "PowerUpNode", "Cleaning"})


def pending_is_stuck(reason: str | None) -> bool:
    """True when the reason cannot clear without someone acting (cancel/resubmit, release,
    an admin); limits that clear as your other jobs end are not stuck."""
    if not reason:
        return False
    if reason in ("PartitionTimeLimit", "PartitionConfig", "PartitionNodeLimit", "DependencyNeverSatisfied",
                  "JobHeldUser", "JobHeldAdmin", "BadConstraints", "InvalidAccount", "InvalidQOS") or reason.startswith(
                      "job requeued in held state"):
        return True
    if reason.startswith(("QOS", "Assoc")):
        return _limit_never_clears(reason)
    return False


def _limit_never_clears(reason: str) -> bool:
    # Per-job caps (the job itself is too big) and used-up budgets (…Minutes, GrpWall) never clear.
    return "PerJob" in reason or "Minutes" in reason or "GrpWall" in reason


def diagnose_pending(reason: str | None, *, partitions: list | None = None, requested: dict | None = None) -> str | None:
    """A message with the fix for pending reasons that need someone to act (or that can take
    a long time, like a partition that is down); None for ordinary waiting (Priority, Resources...)."""
    if not reason or reason in ORDINARY_PENDING:
        return None
    req = requested or {}
    parts = {p.name: p for p in (_Part(x) for x in partitions or [])}
    part = parts.get(req.get("partition") or "")
    named = f"partition '{req['partition']}'" if req.get("partition") else "its partition"
    up = ", ".join(p.name for p in parts.values() if p.state == "up" and p is not part)
    others = f" (partitions that are up: {up})" if up else ""
    if reason == "PartitionDown":
        return f"PartitionDown: {named} is down; the job waits until an admin brings it up. Cancel it and submit to another partition{others}, or wait."
    if reason == "PartitionTimeLimit":
        limit = f" ({_hms(part.max_time)})" if part and part.max_time else ""
        return (f"PartitionTimeLimit: the job's time limit is longer than {named} allows{limit}, so it will never start "
                f"(sbatch accepted it because EnforcePartLimits=NO). Cancel it and resubmit with a shorter resources.time.")
    if reason == "PartitionConfig":
        return (f"PartitionConfig: the job asks for more CPUs, memory or GPUs per node than {named} has, so it will never "
                f"start. Cancel it and resubmit asking for less.")
    if reason == "PartitionNodeLimit":
        return (f"PartitionNodeLimit: the job asks for more nodes than {named} allows or has, so it will never start. "
                f"Cancel it and resubmit with fewer resources.nodes.")
    if reason == "DependencyNeverSatisfied":
        return ("DependencyNeverSatisfied: a job it depends on failed or was cancelled, so it will never start. "
                "Cancel it (scancel) and resubmit.")
    if reason == "JobHeldUser":
        return "JobHeldUser: the job is held (sbatch -H or scontrol hold). Release it with: scontrol release <jobid>."
    if reason == "JobHeldAdmin":
        return "JobHeldAdmin: an administrator holds the job. Ask them to release it, or cancel it."
    if reason.startswith("job requeued in held state"):
        return "the job was requeued and held. Release it with: scontrol release <jobid>."
    if reason.startswith(("ReqNodeNotAvail", "Nodes required for job are DOWN")):
        return (f"{reason}: nodes the job needs are down, drained or reserved (maintenance?). It starts when they are "
                f"back; to move on, cancel it and submit to another partition{others}.")
    if reason == "BadConstraints":
        return "BadConstraints: no node can satisfy the job's constraints. Cancel it and resubmit with other resources."
    if reason in ("InvalidAccount", "InvalidQOS"):
        return f"{reason}: the job's account or QOS is no longer valid. Cancel it and resubmit with a valid one."
    if reason.startswith(("QOS", "Assoc")):
        scope = "QOS" if reason.startswith("QOS") else "account (association)"
        if _limit_never_clears(reason):
            return (f"{reason}: the job is larger than a limit of your {scope} allows, or its budget is used up, so it "
                    f"will not start. Cancel it and resubmit asking for less, or ask the admins.")
        return (f"{reason}: a limit of your {scope} is reached (running jobs, CPUs or GPUs at once); it starts when "
                f"other jobs of yours (or your group's) finish.")
    return None
