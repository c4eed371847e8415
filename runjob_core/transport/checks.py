"""Connectivity checks of a cluster (``runjob clusters check NAME``).

The core checks what every backend with a shell needs (connect, whoami, scratch
writable, free disk); the backend adds its own rows through ``runjob_check_cluster``.
"""

from __future__ import annotations

import uuid

from runjob_core import plugins
from runjob_core.errors import RunjobError
from runjob_core.models import CheckResult

DISK_LOW_FRACTION = 0.10
SOURCE = "runjob-core"


def _row(check: str, ok: bool, detail: str, fix: str | None = None) -> CheckResult:
    return CheckResult(check=check, ok=ok, detail=detail, source=SOURCE, fix=None if ok else fix)


def check_cluster(context, name: str) -> list[dict]:
    cluster = context.clusters.get(name)
    if cluster is None:
        known = ", ".join(sorted(context.clusters))
        raise RunjobError(f"unknown cluster {name!r}; known clusters: {known}")
    plugins.require_backend(context.pm, cluster.type, cluster=name)
    caller = context.hook("runjob_check_cluster", cluster.type)
    if context.backend_info(cluster.type).machine_per_job:
        # No standing host to log in to: the backend's rows (API key, catalog, budget) are all.
        rows = plugins.flatten(caller(cluster=cluster, transport=None, context=context))
    else:
        rows = _core_checks(context, cluster)
        if all(r.ok for r in rows):
            rows += plugins.flatten(caller(cluster=cluster, transport=context.transport(cluster), context=context))
    return [{"check": r.check, "ok": r.ok, "detail": r.detail, "fix": r.fix, "source": r.source} for r in rows]


def _core_checks(context, cluster) -> list[CheckResult]:
    try:
        transport = context.transport(cluster)
        who = transport.run(["whoami"], timeout=30)
    except RunjobError as exc:
        return [_row("connect", False, str(exc), "check host, port, user, identity_file and known_hosts in clusters.yaml")]
    rows = [_row("connect", True, transport.label),
            _row("whoami", who.ok, who.stdout.strip() or who.stderr.strip(), "the account cannot run commands")]
    from runjob_core.staging import scratch_root

    scratch = scratch_root(cluster, transport, context.state_dir)  # the folder jobs really use
    probe = f"{scratch.rstrip('/')}/.runjob-write-test-{uuid.uuid4().hex[:8]}"
    fix = f"make {scratch} writable or change scratch_path in clusters.yaml"
    try:
        transport.makedirs(scratch)
        transport.put_text(probe, "ok\n")
        removed = transport.run(["rm", "-f", probe], timeout=30)
    except (OSError, RunjobError) as exc:
        return rows + [_row("scratch writable", False, f"{scratch}: {exc}", fix)]
    rows.append(_row("scratch writable", removed.ok, scratch, fix))
    free, total = transport.disk_free(scratch)
    fraction = free / total if total else 0.0
    rows.append(_row("free disk on scratch", fraction >= DISK_LOW_FRACTION,
                     f"{free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB ({fraction:.0%})",
                     "free space on scratch: caches and checkpoints need room"))
    return rows
