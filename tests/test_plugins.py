"""Plugin loading: entry points, broken and duplicate plugins, typos, routing."""

import pluggy
import pytest

from runjob_core import hookimpl, plugins
from runjob_core.errors import UnknownBackendError


def test_broken_duplicate_and_misspelled_plugins_are_reported_not_fatal(with_fake_dist):
    pm, infos = plugins.get_plugin_manager()
    by_name = {}
    for info in infos:
        by_name.setdefault(info.name, []).append(info)
    assert "fakegood" in plugins.backend_names(pm)
    [broken] = by_name["fakebroken"]
    assert broken.error and "broken on purpose" in broken.error and broken.dist == "fake-runjob-plugins"
    duplicate = [i for i in by_name["local"] if i.error]
    assert duplicate and "already provided by runjob-local" in duplicate[0].error
    assert [i for i in by_name["local"] if not i.error][0].dist == "runjob-local"
    [typo] = by_name["fakemisspelled"]
    assert typo.error and "runjob_sumbit" in typo.error
    assert pm.get_plugin("fakemisspelled") is None


def test_strict_mode_raises_for_plugin_authors(with_fake_dist, monkeypatch):
    monkeypatch.setenv("RUNJOB_STRICT_PLUGINS", "1")
    with pytest.raises(ImportError):
        plugins.get_plugin_manager()


def test_disable_plugins_by_name(monkeypatch):
    monkeypatch.setenv("RUNJOB_DISABLE_PLUGINS", "health")
    pm, _ = plugins.get_plugin_manager()
    assert pm.get_plugin("health") is None and pm.get_plugin("local") is not None


def test_manager_is_new_each_time():
    assert plugins.get_plugin_manager()[0] is not plugins.get_plugin_manager()[0]


class _Backend:
    def __init__(self, name):
        self.name = name

    @hookimpl
    def runjob_submit(self, job):
        return self.name

    @hookimpl
    def runjob_poll(self, submissions):
        return {"who": self.name}


class _Observer:
    seen = []

    @hookimpl
    def runjob_poll(self, submissions):
        self.seen.append("observer")


def test_routing_calls_only_the_jobs_backend_but_keeps_other_plugins(runjob_pm):
    runjob_pm.register(_Backend("alpha"), name="alpha")
    runjob_pm.register(_Backend("beta"), name="beta")
    runjob_pm.register(_Observer(), name="observer")
    assert plugins.backend_names(runjob_pm) == ["alpha", "beta"]
    assert plugins.routed(runjob_pm, "runjob_submit", "alpha")(job=None, attempt=None, rendered=None, cluster=None, transport=None, context=None) == "alpha"
    assert plugins.routed(runjob_pm, "runjob_poll", "beta")(submissions=[], cluster=None, context=None) == {"who": "beta"}
    assert "observer" in _Observer.seen


def test_unknown_backend_names_installed_ones_and_package(runjob_pm):
    runjob_pm.register(_Backend("alpha"), name="alpha")
    with pytest.raises(UnknownBackendError) as caught:
        plugins.require_backend(runjob_pm, "runpod", cluster="pods")
    assert "installed backends: alpha" in str(caught.value) and "pip install runjob-runpod" in str(caught.value)


def test_misspelled_hookimpl_fails_check_pending(runjob_pm):
    class Typo:
        @hookimpl
        def runjob_pol(self, submissions):
            return None

    runjob_pm.register(Typo(), name="typo")
    with pytest.raises(pluggy.PluginValidationError):
        runjob_pm.check_pending()


def test_every_hook_is_documented_with_result_rule():
    from runjob_core import hookspecs

    for name in dir(hookspecs):
        if name.startswith("runjob_"):
            doc = getattr(hookspecs, name).__doc__
            assert doc and "Result:" in doc and ".. versionadded::" in doc, name
