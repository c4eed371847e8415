"""Contract 2: hooks carry their inputs, machines per job, routing, isolation, backend keys.

The backend under test here, ``rented``, rents a "machine" per attempt the way a RunPod
backend does (provision -> transport for that machine -> submit -> release), but runs the
job with the local runner, so the whole lifecycle runs for real on this machine.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import attrs
import pytest

from runjob_core import hookimpl, lifecycle, monitor, plugins
from runjob_core.errors import ConfigError, UnknownBackendError
from runjob_core.models import LOST, BackendInfo, Finding, JobStatus, Machine
from runjob_core.transport import LocalTransport



# ----------------------------------------------------------------------------- the contract text


def test_every_hook_parameter_is_documented():
    from runjob_core import hookspecs

    for name in [n for n in dir(hookspecs) if n.startswith("runjob_")]:
        function = getattr(hookspecs, name)
        doc = function.__doc__ or ""
        for parameter in inspect.signature(function).parameters:
            assert re.search(rf":param {parameter}:", doc), f"{name}: parameter {parameter!r} is not documented"


# ----------------------------------------------------------------------------- loading


def test_a_misspelled_hook_gets_a_did_you_mean(with_fake_dist):
    _pm, infos = plugins.get_plugin_manager()
    [typo] = [i for i in infos if i.name == "fakemisspelled"]
    assert "did you mean 'runjob_submit'?" in typo.error


def test_a_broken_installed_backend_is_reported_broken_not_missing(with_fake_dist):
    pm, _infos = plugins.get_plugin_manager()
    with pytest.raises(UnknownBackendError) as caught:
        plugins.require_backend(pm, "fakebroken", cluster="mine")
    message = str(caught.value)
    assert "is installed (fake-runjob-plugins) but broken" in message and "broken on purpose" in message
    assert "pip install" not in message


def test_health_scan_runs_a_third_party_checker_through_the_hook(with_fake_dist, tmp_path, runjob_home):
    from click.testing import CliRunner

    from runjob_core.cli import cli

    log = tmp_path / "job.log"
    log.write_text("step 1\nFAKE-PROBLEM here\nstep 2\n")
    result = CliRunner().invoke(cli, ["health", "scan", str(log), "--json"], catch_exceptions=False)
    import json

    findings = json.loads(result.stdout)[0]["findings"]
    assert {"label": "fake_problem", "line": 2, "source": "fakechecker"}.items() <= findings[0].items()


# ----------------------------------------------------------------------------- a machine per job


@attrs.frozen
class RentedOptions:
    """The rented backend's own cluster keys."""

    price_per_hour: float = 1.0
    fail_staging: bool = False


class Rented:
    """A backend that creates a machine per attempt (the machine is this host, the job runs
    with the local runner): what the contract must carry for RunPod-like backends."""

    def __init__(self, *, lose_first: bool = False) -> None:
        self.provisioned: list[str] = []
        self.released: list[tuple[str, str]] = []
        self.transports: list[str | None] = []
        self.lose_first = lose_first

    @hookimpl
    def runjob_backend_info(self):
        return BackendInfo(name="rented", source="rented", options=RentedOptions, machine_per_job=True,
                           poll_interval=0.2, max_poll_interval=1.0)

    @hookimpl
    def runjob_provision(self, attempt, cluster):
        assert cluster.options.price_per_hour == 2.5
        machine = Machine(id=f"m-{attempt.tag}", host=None, port=22, user="root", source="rented")
        self.provisioned.append(machine.id)
        return machine

    @hookimpl
    def runjob_transport(self, cluster, machine):
        self.transports.append(machine.id if machine else None)
        if machine is not None and cluster.options.fail_staging:
            return _FailingTransport()
        return LocalTransport()

    @hookimpl
    def runjob_submit(self, job, attempt, rendered, cluster, transport, context):
        from runjob_local import _runner

        assert attempt.machine is not None and attempt.machine.id == f"m-{attempt.tag}"
        return _runner.submit(job, attempt, rendered, attrs.evolve(cluster, type="rented"), context)

    @hookimpl
    def runjob_poll(self, submissions):
        from runjob_local import _runner

        statuses = _runner.poll(submissions)
        if self.lose_first:
            for s in submissions:
                if s.attempt == 1 and statuses[s.backend_job_id].terminal:
                    statuses[s.backend_job_id] = JobStatus(state=LOST, source="rented", reason="machine reclaimed",
                                                           resumable=True)
        return statuses

    @hookimpl
    def runjob_cancel(self, submissions):
        from runjob_local import _runner

        return _runner.cancel(submissions)

    @hookimpl(tryfirst=True)
    def runjob_collect(self, submission, dest):
        from runjob_local import _runner

        return _runner.collect(submission, dest)

    @hookimpl
    def runjob_release(self, machine, reason):
        self.released.append((machine.id, reason))


class _FailingTransport(LocalTransport):
    def put_tree(self, root, files, *, also_make=()):
        from runjob_core.errors import TransportError

        raise TransportError("the machine went away while staging")


def _context(runjob_home: Path, backend: Rented, **options):
    pm, _ = plugins.get_plugin_manager()
    pm.register(backend, name="rented")
    lines = "".join(f"    {k}: {v}\n" for k, v in {"price_per_hour": 2.5, **options}.items())
    clusters = runjob_home / ".runjob" / "clusters.yaml"
    clusters.parent.mkdir(parents=True, exist_ok=True)
    clusters.write_text(f"clusters:\n  box:\n    type: rented\n    scratch_path: {runjob_home}/scratch\n{lines}")
    return lifecycle.open_context(pm=pm)


def _job(name: str, command: str, **fields):
    from runjob_core.config import job_from_mapping

    return job_from_mapping({"name": name, "command": command, "cluster": "box", **fields}, source=f"{name}.yaml",
                            base_dir=str(Path.cwd()))


def test_a_machine_per_job_is_provisioned_used_harvested_and_released_when_it_ends(runjob_home):
    backend = Rented()
    context = _context(runjob_home, backend)
    job = _job("rent", 'printf \'{"id": 1}\\n\' > "$RUNJOB_RESULTS/results.jsonl"')
    launched = lifecycle.launch(context, job)
    row = launched.row
    assert launched.submission.machine.id == f"m-runjob:{row.id}:1"
    assert context.store.attempt(row.id, 1).machine.id == launched.submission.machine.id
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    assert context.store.latest_attempt(row.id).state == "COMPLETED"
    # Released in the cycle that saw the end, its files copied home first (issue 25 item 3).
    assert backend.released == [(f"m-runjob:{row.id}:1", "ended COMPLETED")]
    assert context.store.attempt(row.id, 1).released_at is not None
    assert f"m-runjob:{row.id}:1" in backend.transports  # the job's own transport served the harvest
    collected = lifecycle.collect(context, context.store.get_job(row.id))
    assert collected.ok, collected.problems
    assert backend.released == [(f"m-runjob:{row.id}:1", "ended COMPLETED")]  # once
    context.close()


def test_submit_failing_after_provisioning_releases_the_machine(runjob_home):
    backend = Rented()
    context = _context(runjob_home, backend, fail_staging="true")
    from runjob_core.errors import TransportError

    with pytest.raises(TransportError):
        lifecycle.launch(context, _job("stage-fails", "true"))
    # A lost connection keeps the attempt SUBMITTING (the job may exist): nothing is released yet.
    [row] = context.store.list_jobs()
    assert context.store.latest_attempt(row.id).state == "SUBMITTING"
    assert backend.released == []
    context.close()


def test_a_rejected_submission_releases_the_machine(runjob_home):
    class Refusing(Rented):
        @hookimpl
        def runjob_submit(self, job, attempt, rendered, cluster, transport, context):
            from runjob_core.errors import BackendError

            raise BackendError("no GPUs of that type today")

    backend = Refusing()
    context = _context(runjob_home, backend)
    from runjob_core.errors import BackendError

    with pytest.raises(BackendError):
        lifecycle.launch(context, _job("refused", "true"))
    [row] = context.store.list_jobs()
    assert backend.released == [(f"m-runjob:{row.id}:1", "submit failed: no GPUs of that type today")]
    assert context.store.attempts(row.id) == []
    context.close()


def test_a_lost_machine_the_backend_marks_resumable_is_resumed_on_a_new_machine(runjob_home):
    backend = Rented(lose_first=True)
    context = _context(runjob_home, backend)
    row = lifecycle.launch(context, _job("lost", "echo working")).row
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    attempts = context.store.attempts(row.id)
    assert [a.state for a in attempts] == ["LOST", "COMPLETED"]
    assert backend.provisioned == [f"m-runjob:{row.id}:1", f"m-runjob:{row.id}:2"]
    assert (f"m-runjob:{row.id}:1", "ended LOST") in backend.released
    kinds = [e.kind for e in context.store.events(row.id)]
    assert "resuming" in kinds and kinds.count("provisioned") == 2
    context.close()


def test_a_cancel_releases_the_machine(runjob_home):
    backend = Rented()
    context = _context(runjob_home, backend)
    row = lifecycle.launch(context, _job("cancelled", "sleep 60")).row
    lifecycle.cancel(context, context.store.get_job(row.id))
    assert backend.released == [(f"m-runjob:{row.id}:1", "cancelled")]
    context.close()


def test_clusters_check_skips_host_checks_for_machine_per_job_backends(runjob_home):
    from runjob_core.transport import checks
    class Checked(Rented):
        @hookimpl
        def runjob_check_cluster(self, cluster, transport):
            from runjob_core.models import CheckResult

            return [CheckResult(check="api key", ok=transport is None, detail="accepted", source="rented")]

    context = _context(runjob_home, Checked())
    rows = checks.check_cluster(context, "box")
    assert [r["check"] for r in rows] == ["api key"] and rows[0]["ok"]
    context.close()


# ----------------------------------------------------------------------------- backend keys


def test_backend_keys_are_validated_with_path_and_did_you_mean(runjob_home):
    from runjob_core import config

    backends = {"rented": Rented().runjob_backend_info()}
    path = runjob_home / "clusters.yaml"
    path.write_text("clusters:\n  box:\n    type: rented\n    price_per_hour: 3\n")
    assert config.load_clusters(path, backends=backends)["box"].options == RentedOptions(price_per_hour=3.0)
    path.write_text("clusters:\n  box:\n    type: rented\n    price_per_huor: 3\n    fail_staging: maybe\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path, backends=backends)
    problems = caught.value.problems
    assert any("unknown key 'price_per_huor' at $.clusters.box" in p and "did you mean 'price_per_hour'?" in p for p in problems)
    assert any("$.clusters.box.fail_staging" in p for p in problems)


def test_declared_options_bring_choices_rules_help_and_rows_without_code_in_the_core(runjob_home):
    """The declared-options mechanism, for any backend (runjob_core.config.options)."""
    from runjob_core import config
    from runjob_core.config import options

    @attrs.frozen
    class QueueOptions(options.ClusterOptions):
        queue: str = options.option("batch", help="the queue jobs go to", choices=("batch", "short"))
        slots: int = options.option(1, help="slots per job")
        max_slots: int = options.option(8, help="the most slots a job may ask")

        def problems(self, cluster):
            if self.slots > self.max_slots:
                yield "slots", f"slots ({self.slots}) above max_slots ({self.max_slots}): lower it"

        def describe(self, job):
            return [("queue", self.queue)] + ([("job", job.name)] if job is not None else [])

    backends = {"q": BackendInfo(name="q", source="runjob-q", options=QueueOptions),
                "other": BackendInfo(name="other", source="runjob-other", options=RentedOptions)}
    path = runjob_home / "clusters.yaml"
    path.write_text("clusters:\n  box:\n    type: q\n    queue: short\n    slots: 9\n    queue_x: 1\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path, backends=backends)
    assert caught.value.problems == [f"unknown key 'queue_x' at $.clusters.box in {path} (backend 'q'); did you mean 'queue'?"]
    path.write_text("clusters:\n  box:\n    type: q\n    queue: long\n    slots: 9\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path, backends=backends)
    assert caught.value.problems == [f"queue must be 'batch' or 'short', not 'long' at $.clusters.box.queue in {path}",
                                     f"slots (9) above max_slots (8): lower it at $.clusters.box.slots in {path}"]
    path.write_text("clusters:\n  box:\n    type: q\n    price_per_hour: 2\n")
    with pytest.raises(ConfigError) as caught:
        config.load_clusters(path, backends=backends)
    assert caught.value.problems == [f"unknown key 'price_per_hour' at $.clusters.box in {path} (backend 'q'); it is a key "
                                     "of 'other' clusters: remove it, or set type: other"]
    path.write_text("clusters:\n  box:\n    type: q\n    queue: short\n    slots: 2\n")
    box = config.load_clusters(path, backends=backends)["box"]
    assert box.options == QueueOptions(queue="short", slots=2)
    assert options.describe(box) == [("queue", "short")]
    job = config.job_from_mapping({"name": "j", "command": "true"}, source="j.yaml")
    assert lifecycle.review_rows(job, box)[1:4] == [("cluster", "box (q)"), ("queue", "short"), ("job", "j")]
    assert options.flat(box)["queue"] == "short" and "options" not in options.flat(box)
    assert [(d.name, d.default, d.choices) for d in options.declared(QueueOptions)][0] == ("queue", "batch", ("batch", "short"))


def test_keys_of_a_backend_that_is_not_installed_wait_for_it(runjob_home):
    from runjob_core import config

    path = runjob_home / "clusters.yaml"
    path.write_text("clusters:\n  pods:\n    type: runpod\n    gpu_types: [H100]\n")
    cluster = config.load_clusters(path, backends={})["pods"]
    assert cluster.options == {"gpu_types": ["H100"]}


def test_required_core_keys_come_from_the_backend(runjob_home):
    from runjob_core import config

    path = runjob_home / "clusters.yaml"
    path.write_text("clusters:\n  hpc:\n    type: slurm\n")
    with pytest.raises(ConfigError, match=r"required key missing at \$\.clusters\.hpc\.host"):
        config.load_clusters(path, backends={"slurm": BackendInfo(name="slurm", source="t", required_keys=("host",))})


# ----------------------------------------------------------------------------- routing, isolation


class _OtherBackend:
    """A second backend whose hooks must never run for a local job."""

    calls: list[str] = []

    @hookimpl
    def runjob_submit(self, job):
        raise AssertionError("not my job")

    @hookimpl
    def runjob_estimate(self, job):
        self.calls.append("estimate")
        raise RuntimeError("the other backend's estimate ran for a local job")


def test_estimate_is_routed_to_the_jobs_backend(runjob_home):
    pm, _ = plugins.get_plugin_manager()
    pm.register(_OtherBackend(), name="other")
    context = lifecycle.open_context(pm=pm)
    checks = lifecycle.preflight(context, _job("routed", "true", cluster="local"), context.clusters["local"])
    assert _OtherBackend.calls == [] and not checks.refused
    context.close()


class _BrokenChecker:
    @hookimpl
    def runjob_check_health(self, window):
        raise ZeroDivisionError("checker bug")

    @hookimpl
    def runjob_collect(self, dest):
        raise KeyError("publisher bug")


class _GoodChecker:
    @hookimpl
    def runjob_check_health(self, job, window, progress):
        if "SPECIAL" in window:
            return [Finding(label="special", severity="info", message="seen", action="continue", source="good")]
        return None


def test_a_failing_plugin_is_named_once_and_the_rest_carries_on(runjob_home):
    pm, _ = plugins.get_plugin_manager()
    pm.register(_BrokenChecker(), name="brokenchecker")
    pm.register(_GoodChecker(), name="goodchecker")
    context = lifecycle.open_context(pm=pm)
    job = _job("isolated", "echo SPECIAL; sleep 1; echo more", cluster="local")
    row = lifecycle.launch(context, job).row
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    assert context.store.latest_attempt(row.id).state == "COMPLETED"
    collected = lifecycle.collect(context, context.store.get_job(row.id))
    errors = context.store.events(row.id, kinds=("plugin_error",))
    health_errors = [e for e in errors if e.data.get("hook") == "runjob_check_health"]
    assert len(health_errors) == 1 and "brokenchecker" in health_errors[0].message
    assert [e for e in errors if e.data.get("hook") == "runjob_collect"]
    assert any(f.data.get("label") == "special" for f in context.store.events(row.id, kinds=("finding",)))
    assert not collected.ok and any("brokenchecker" in p for p in collected.problems)
    context.close()


# ----------------------------------------------------------------------------- the tree


def test_no_core_module_imports_a_plugin_or_names_a_backend():
    import ast

    core = Path(__file__).resolve().parents[1] / "runjob_core"
    plugin_packages = ("runjob_local", "runjob_slurm", "runjob_health", "runjob_hub", "runjob_runpod")
    offenders = []
    for path in core.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(core)} imports {n}" for n in names if n.split(".")[0] in plugin_packages]
            # A backend named in code (not the built-in `local` cluster, which always exists).
            if isinstance(node, ast.Constant) and node.value in ("slurm", "runpod"):
                offenders.append(f"{path.relative_to(core)} names the backend {node.value!r}")
    assert offenders == []


class _WholeFileChecker:
    windows: list[str] = []

    @hookimpl
    def runjob_scan_log(self, path):
        return [Finding(label="whole", severity="info", message=f"{path.name} at once", action="continue", source="whole")]

    @hookimpl
    def runjob_check_health(self, window):
        self.windows.append(window)


def test_a_whole_file_scanner_is_not_also_fed_windows(tmp_path):
    from runjob_core.monitor import scan as health_scan
    log = tmp_path / "job.log"
    log.write_text("line one\nline two\n")
    pm, _ = plugins.get_plugin_manager()
    pm.register(_WholeFileChecker(), name="whole")
    context = lifecycle.offline_context(pm)
    labels = [f.label for f in health_scan.scan_file(context, log)]
    assert "whole" in labels and _WholeFileChecker.windows == []
    context.close()


def test_a_job_whose_machine_does_not_answer_after_the_poll_is_read_again_next_cycle(runjob_home):
    from runjob_core.errors import TransportError

    class Flaky(LocalTransport):
        fail = True

        def read_text(self, path):
            if Flaky.fail:
                raise TransportError("the pod's sshd dropped the connection")
            return super().read_text(path)

    class FlakyRented(Rented):
        @hookimpl
        def runjob_transport(self, cluster, machine):
            return Flaky() if machine is not None else LocalTransport()

    context = _context(runjob_home, FlakyRented())
    row = lifecycle.launch(context, _job("flaky", "echo done")).row
    monitor.cycle(context, [row.id])
    assert [e.kind for e in context.store.events(row.id, kinds=("transient",))] == ["transient"]
    Flaky.fail = False
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    assert context.store.latest_attempt(row.id).state == "COMPLETED"
    context.close()


def test_status_shows_what_a_rented_machine_costs(runjob_home):
    from runjob_core.cli.status import attempt_cost

    class Priced(Rented):
        @hookimpl
        def runjob_provision(self, attempt, cluster):
            return Machine(id=f"m-{attempt.tag}", host=None, port=22, user="root", source="rented", data={"usd_per_hour": 3.6})

    context = _context(runjob_home, Priced())
    row = lifecycle.launch(context, _job("priced", "sleep 2")).row
    context.store._db.execute("UPDATE attempts SET submitted_at = submitted_at - 100 WHERE job_id = ?", (row.id,))
    live = attempt_cost(context.store, context.store.attempt(row.id, 1))
    assert live["usd_per_hour"] == 3.6 and live["usd"] >= 0.1 and not live["cost_final"]  # 100 s at $3.60/h
    context.store.add_artifact(row.id, attempt=1, name="pod-cost", kind="cost", location="pod", source="rented",
                               rows=None, data={"usd": 0.42})
    billed = attempt_cost(context.store, context.store.attempt(row.id, 1))
    assert billed["usd"] == 0.42 and billed["cost_final"]
    lifecycle.cancel(context, context.store.get_job(row.id))
    context.close()


def test_collect_resume_and_check_health_get_the_jobs_cluster(runjob_home):
    """The per-job hooks all receive the job's ``clusters.yaml`` entry, as submit and poll do."""
    seen: dict[str, set] = {"collect": set(), "resume": set(), "check_health": set()}

    class Listening(Rented):
        @hookimpl(tryfirst=True)
        def runjob_collect(self, submission, dest, cluster):
            seen["collect"].add(cluster.name)
            return super().runjob_collect(submission, dest)

        @hookimpl
        def runjob_resume(self, cluster):
            seen["resume"].add(cluster.name)  # None: the core's default plans the resume

        @hookimpl
        def runjob_check_health(self, cluster):
            seen["check_health"].add(cluster.name)

    backend = Listening(lose_first=True)
    context = _context(runjob_home, backend)
    job = _job("listened", 'printf \'{"id": 1}\\n\' > "$RUNJOB_RESULTS/results.jsonl"')
    row = lifecycle.launch(context, job).row
    monitor.watch(context, [row.id], min_interval=0.2, max_interval=0.5)
    assert [a.state for a in context.store.attempts(row.id)] == ["LOST", "COMPLETED"]
    collected = lifecycle.collect(context, context.store.get_job(row.id))
    assert collected.ok, collected.problems
    assert seen == {"collect": {"box"}, "resume": {"box"}, "check_health": {"box"}}
    context.close()


def test_there_is_one_hookimpl_marker():
    """Plugins and the core's own implementations mark hooks with ``runjob_core.hookimpl``."""
    root = Path(__file__).resolve().parents[1]
    files = [*root.glob("runjob_core/**/*.py"), *root.glob("plugins/*/src/**/*.py")]
    makers = [str(f.relative_to(root)) for f in files if "HookimplMarker(" in f.read_text()]
    assert makers == ["runjob_core/__init__.py"]


def test_a_submit_builds_its_attempt_once(runjob_home, monkeypatch):
    """One submit, one Attempt built (tag, layout, limit): a provisioned machine is given to
    that same attempt, which is passed down to provision, render, stage and submit."""
    built = []
    real = lifecycle.new_attempt
    monkeypatch.setattr(lifecycle, "new_attempt", lambda *a, **k: built.append(k["n"]) or real(*a, **k))
    backend = Rented()
    context = _context(runjob_home, backend)
    launched = lifecycle.launch(context, _job("once", "true"))
    assert built == [1]
    assert launched.submission.machine.id == f"m-runjob:{launched.row.id}:1"
    # A resubmit (the monitor's resume) builds its own attempt once too.
    monitor.watch(context, [launched.row.id], min_interval=0.2, max_interval=0.5)
    again = lifecycle.resubmit(context, context.store.get_job(launched.row.id), resume_from=None, resume_env={})
    assert built == [1, 2] and again.attempt == 2 and again.machine.id == f"m-runjob:{launched.row.id}:2"
    context.close()
