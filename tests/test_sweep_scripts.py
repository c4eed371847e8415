"""An array's first attempts and scripts made from one render (runjob_core.sweep._scripts):
each element's attempt and script equal, field for field and byte for byte, what
lifecycle.new_attempt and lifecycle.render make for it alone; and everything the substitution
cannot stand for makes each element's on its own."""

import sys
import textwrap

import attrs
import pytest

from runjob_core import lifecycle
from runjob_core.store import new_job_id
from runjob_core.sweep import _scripts, sweep_from_mapping


@pytest.fixture
def context(runjob_home, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(runjob_home.parent / "cache"))
    (runjob_home / ".runjob").mkdir()
    (runjob_home / ".runjob" / "clusters.yaml").write_text("clusters:\n  box: {type: local}\n")
    opened = lifecycle.open_context()
    yield opened
    opened.close()


def sweep_of(runjob_home, params, **spec):
    raw = {"name": "grid", "command": "python3 train.py --out \"$RUNJOB_RESULTS\"", "cluster": "box",
           "env": {"WHO": "me"}, **spec, "sweep": {"params": params}}
    return sweep_from_mapping(raw, source=str(runjob_home / "grid.yaml"), base_dir=str(runjob_home))


def made(context, sweep):
    cluster = context.clusters["box"]
    ids = [new_job_id() for _ in sweep.jobs]
    with lifecycle.templates_held(context) as templates:
        first = _scripts.first_attempts(context, cluster, sweep.jobs, ids, templates)
    own = []
    for job, job_id in zip(sweep.jobs, ids):
        attempt = lifecycle.new_attempt(context, job, cluster, job_id=job_id, n=1)
        own.append((attempt, lifecycle.render(context, job, attempt, cluster)))
    return first, own


def test_each_element_is_its_own_attempt_and_render_byte_for_byte(context, runjob_home):
    sweep = sweep_of(runjob_home, {"lr": [0.1, 0.3, 1e-4], "seed": [1, 2], "tag": ["a b", "x'; rm -rf ~"]})
    first, own = made(context, sweep)
    assert first.model is not None  # made from one render
    assert list(zip(first.attempts, first.rendereds)) == own  # every element, not only the two checked
    for (attempt, rendered), job in zip(own, sweep.jobs):
        assert first.model.script_for(job.name, attempt.job_id) == rendered.script
        assert job.name in rendered.script and attempt.job_id in rendered.script
        assert first.model.name_in not in rendered.script and first.model.id_in not in rendered.script


def test_a_spec_field_that_varies_makes_each_its_own(context, runjob_home):
    sweep = sweep_of(runjob_home, {"env.WHO": ["a", "b", "c", "d"]})
    first, own = made(context, sweep)
    assert first.model is None
    assert list(zip(first.attempts, first.rendereds)) == own
    assert ["export WHO=" + v in r.script for v, (_a, r) in zip("abcd", own)] == [True] * 4


def test_a_user_template_folder_makes_each_its_own(context, runjob_home):
    (runjob_home / ".runjob" / "templates").mkdir()
    (runjob_home / ".runjob" / "templates" / "local.sh.j2").write_text(
        '{% extends job.template ~ ".sbatch.j2" %}\n{% block header %}# lr {{ job.params.lr }}\n{% endblock %}\n')
    sweep = sweep_of(runjob_home, {"lr": [1, 2, 3, 4]})
    first, own = made(context, sweep)
    assert first.model is None
    assert [r.script for r in first.rendereds] == [r.script for _a, r in own]
    assert "# lr 3" in first.rendereds[2].script


def test_a_template_that_is_not_as_declared_is_caught_by_the_check(context, runjob_home, monkeypatch):
    # A template whose text depends on params, were its plugin to declare otherwise: the real
    # renders of the first and last element differ from the made ones, so each is made alone.
    (runjob_home / ".runjob" / "templates").mkdir()
    (runjob_home / ".runjob" / "templates" / "local.sh.j2").write_text(
        '{% extends job.template ~ ".sbatch.j2" %}\n{% block header %}# seed {{ job.params.seed }}\n{% endblock %}\n')
    monkeypatch.setattr(_scripts, "_templates_declared", lambda context: True)
    sweep = sweep_of(runjob_home, {"seed": [5, 6, 7, 8]})
    first, own = made(context, sweep)
    assert first.model is None
    assert [r.script for r in first.rendereds] == [r.script for _a, r in own]


def test_a_backend_that_does_not_declare_it_makes_each_its_own(context, runjob_home, monkeypatch):
    declared = context.backend_info("local")
    monkeypatch.setattr(type(context), "backend_info",
                        lambda self, name: attrs.evolve(declared, scripts_by_substitution=False))
    first, own = made(context, sweep_of(runjob_home, {"lr": [1, 2, 3, 4]}))
    assert first.model is None
    assert list(zip(first.attempts, first.rendereds)) == own


def test_a_plugin_bringing_templates_without_declaring_it_makes_each_its_own(context, runjob_home, monkeypatch):
    # Its templates folder is searched before the core's: it could replace base.sbatch.j2 for every backend.
    package = runjob_home.parent / "plugins" / "rjextra"
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent('''
        def runjob_backend_info():
            from runjob_core.models import BackendInfo
            return BackendInfo(name="extra", source="rjextra")
    '''))
    monkeypatch.syspath_prepend(str(package.parent))
    import rjextra

    assert _scripts._templates_declared(context)
    context.pm.register(rjextra, name="rjextra")
    try:
        assert not _scripts._templates_declared(context)
    finally:
        context.pm.unregister(name="rjextra")
        sys.modules.pop("rjextra", None)


def test_a_name_or_id_that_would_be_quoted_makes_each_its_own(context, runjob_home):
    sweep = sweep_of(runjob_home, {"lr": [1, 2, 3, 4]})
    cluster = context.clusters["box"]
    ids = [new_job_id() for _ in sweep.jobs]
    ids[2] = "rj-odd id"
    with lifecycle.templates_held(context) as templates:
        first = _scripts.first_attempts(context, cluster, sweep.jobs, ids, templates)
    assert first.model is None
    assert "export RUNJOB_ID='rj-odd id'" in first.rendereds[2].script
