"""The plugin manager: made per use (never a module global), loaded from entry points.

Plugins are found in the ``runjob`` entry-point group; the entry-point name is the
plugin's name and, for a backend, the ``type:`` that clusters.yaml refers to. A plugin
that fails to import, implements a misspelled hook, or claims a name that is taken is
recorded in :class:`PluginInfo` (``runjob plugins`` shows it) and left out, so one broken
plugin never breaks runjob. ``RUNJOB_STRICT_PLUGINS=1`` turns those into errors, for
plugin authors; ``RUNJOB_DISABLE_PLUGINS=a,b`` blocks plugins by name.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable
from typing import Any

import attrs
import pluggy

from runjob_core import hookspecs
from runjob_core._entry_points import EntryPoint, entry_points
from runjob_core.errors import UnknownBackendError

log = logging.getLogger(__name__)

GROUP = "runjob"
#: The core's own implementations; registered first so that they are called last (among
#: themselves, last registered first: model_length's estimate comes after memory and time).
#: The reporting plugin (``runjob_collected``) comes after every other plugin's notice.
DEFAULT_PLUGINS = ("runjob_core.defaults.model_length", "runjob_core.defaults", "runjob_core.defaults.throughput", "runjob_core.defaults.gpu_health",
                   "runjob_core.readers", "runjob_core.reporting.plugin")


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, remembering what went wrong while loading (for messages)."""

    def __init__(self) -> None:
        super().__init__("runjob")
        #: Plugins that failed to load or were dropped, by name.
        self.problems: dict[str, PluginInfo] = {}


@attrs.frozen
class PluginInfo:
    name: str
    dist: str | None
    version: str | None
    hooks: tuple[str, ...] = ()
    is_backend: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _strict() -> bool:
    return os.environ.get("RUNJOB_STRICT_PLUGINS", "") not in ("", "0")


def get_plugin_manager(*, load_entrypoints: bool = True) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """Return a new plugin manager and what happened to each plugin while loading it."""
    pm = PluginManager()
    pm.add_hookspecs(hookspecs)
    errors: list[PluginInfo] = []
    for modname in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
    for name in filter(None, (n.strip() for n in os.environ.get("RUNJOB_DISABLE_PLUGINS", "").split(","))):
        pm.set_blocked(name)
    dists: dict[str, tuple[str | None, str | None]] = {}
    if load_entrypoints:
        errors += _load_entrypoints(pm, dists)
    errors += _drop_invalid(pm, dists)
    pm.problems = {info.name: info for info in errors}
    return pm, describe(pm, dists) + errors


#: The environment a plugin manager depends on (besides the import path).
_PLUGIN_ENV = ("RUNJOB_DISABLE_PLUGINS", "RUNJOB_STRICT_PLUGINS")
#: Where Jinja2's compiled templates are kept (runjob_core.templating): an environment made ahead uses its own.
_TEMPLATE_CACHE_ENV = ("XDG_CACHE_HOME", "HOME")


class Prepared:
    """A plugin manager built ahead of the command that uses it: the warm process
    (:mod:`runjob_core.warm.server`) builds one before it forks a command's child, which
    takes it instead of registering every plugin again (~20-30 ms of each command). It is
    taken once (a second :func:`take` builds nothing: the caller makes its own, as always),
    and only where the child's environment would build the same one and it loaded cleanly:
    a plugin that failed to load is built again in the child, which says so itself."""

    def __init__(self, pm: PluginManager | None = None, *, templates: dict[Any, Any] | None = None) -> None:
        """*pm*: one just built by :func:`get_plugin_manager` in this environment (else one is built).
        *templates*: Jinja2 environments made ahead for its plugins, as
        :func:`runjob_core.lifecycle.templates_for` keeps them (:func:`runjob_core.lifecycle.prepared_templates`)."""
        self._env = tuple(os.environ.get(name) for name in _PLUGIN_ENV)
        self._cache_env = tuple(os.environ.get(name) for name in _TEMPLATE_CACHE_ENV)
        pm = pm or get_plugin_manager()[0]
        self._pm = None if pm.problems else pm
        self._templates = templates or {}
        self._given = False
        #: What the child does once its caller has the exit code (the stores' WAL settled).
        self.after_answer: list[Any] = []

    def take(self) -> pluggy.PluginManager | None:
        pm, self._pm = self._pm, None
        if pm is None or tuple(os.environ.get(name) for name in _PLUGIN_ENV) != self._env:
            return None
        self._given = True
        return pm

    def take_templates(self) -> dict[Any, Any]:
        """The environments made ahead, once, after :meth:`take` gave the manager they were made
        for, and only where their compiled templates' cache folder is the same (else empty)."""
        templates, self._templates = self._templates, {}
        if not self._given or tuple(os.environ.get(name) for name in _TEMPLATE_CACHE_ENV) != self._cache_env:
            return {}
        return templates


def _load_entrypoints(pm: pluggy.PluginManager, dists: dict[str, tuple[str | None, str | None]]) -> list[PluginInfo]:
    errors: list[PluginInfo] = []
    for ep in sorted(entry_points(GROUP), key=_load_order):
        dist, version = ep.dist, ep.version
        if pm.is_blocked(ep.name):
            continue
        if pm.has_plugin(ep.name):
            # pluggy would skip the second one silently; say who clashed instead.
            owner = dists.get(ep.name, (None, None))[0]
            message = f"plugin name {ep.name!r} from {dist} is already provided by {owner}; {dist} was not loaded"
            errors.append(PluginInfo(ep.name, dist, version, error=message))
            continue
        try:
            plugin = ep.load()
            pm.register(plugin, name=ep.name)
        except Exception as exc:  # one broken plugin must not stop runjob; it is reported, not hidden
            if _strict():
                raise
            log.warning("could not load runjob plugin %r from %s: %s", ep.name, dist, exc)
            errors.append(PluginInfo(ep.name, dist, version, error=f"failed to load: {type(exc).__name__}: {exc}"))
            continue
        dists[ep.name] = (dist, version)
    return errors


def _load_order(ep: EntryPoint) -> tuple[str, int, str]:
    # When two distributions claim one name, the one named runjob-<name> keeps it, so a
    # third-party package can never silently take over a built-in backend.
    dist = ep.dist or ""
    return ep.name, 0 if dist == f"runjob-{ep.name}" else 1, dist


def _drop_invalid(pm: pluggy.PluginManager, dists: dict[str, tuple[str | None, str | None]]) -> list[PluginInfo]:
    """Unregister plugins that implement hooks runjob does not know (a typo fails loudly)."""
    dropped: list[PluginInfo] = []
    while True:
        try:
            pm.check_pending()
            return dropped
        except pluggy.PluginValidationError as exc:
            if _strict():
                raise
            name = pm.get_name(exc.plugin) or repr(exc.plugin)
            pm.unregister(exc.plugin)
            dist, version = dists.pop(name, (None, None))
            dropped.append(PluginInfo(name, dist, version, error=f"invalid: {exc}{_did_you_mean_hook(str(exc))}"))


def describe(pm: pluggy.PluginManager, dists: dict[str, tuple[str | None, str | None]] | None = None) -> list[PluginInfo]:
    infos = []
    for name, plugin in sorted(pm.list_name_plugin()):
        if plugin is None:
            continue
        hooks = tuple(sorted(caller.name for caller in pm.get_hookcallers(plugin) or ()))
        dist, version = (dists or {}).get(name, (None, None))
        infos.append(PluginInfo(name, dist, version, hooks, is_backend=name in backend_names(pm)))
    return infos


def backend_names(pm: pluggy.PluginManager) -> list[str]:
    # A wrapper around runjob_submit (auditing, counting) does not make a plugin a backend.
    return sorted(
        pm.get_name(impl.plugin)
        for impl in pm.hook.runjob_submit.get_hookimpls()
        if pm.get_name(impl.plugin) not in DEFAULT_PLUGINS and not (impl.wrapper or impl.hookwrapper)
    )


def _did_you_mean_hook(message: str) -> str:
    """pluggy says "unknown hook 'runjob_sumbit' in plugin ..."; name the hook meant."""
    import difflib
    import re

    match = re.search(r"unknown hook '([^']+)'", message)
    if not match:
        return ""
    known = [name for name in dir(hookspecs) if name.startswith("runjob_")]
    close = difflib.get_close_matches(match.group(1), known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def require_backend(pm: pluggy.PluginManager, backend: str, *, cluster: str | None = None) -> None:
    names = backend_names(pm)
    if backend in names:
        return
    where = f" (cluster {cluster!r})" if cluster else ""
    broken = getattr(pm, "problems", {}).get(backend)
    if broken is not None:
        # Installed but unusable: "pip install" would not help, the error would.
        message = (f"backend {backend!r}{where} is installed ({broken.dist or 'unknown distribution'}) but broken: "
                   f"{broken.error}. Reinstall or fix it; `runjob plugins` lists what loaded")
        raise UnknownBackendError(message)
    installed = ", ".join(names) or "none"
    import difflib

    close = difflib.get_close_matches(backend, names, n=1, cutoff=0.6)
    if close:
        # A typo of an installed backend: suggesting `pip install runjob-slrum` would send the
        # user to install a package that does not exist (or, worse, someone else's).
        message = f"no backend named {backend!r}{where}; did you mean {close[0]!r}? Installed backends: {installed}"
    else:
        message = f"no backend named {backend!r}{where}; installed backends: {installed}. Install it with: pip install runjob-{backend}"
    raise UnknownBackendError(message)


def backend_infos(pm: pluggy.PluginManager) -> dict[str, Any]:
    """What each backend declares through ``runjob_backend_info``, by backend name."""
    from runjob_core.models import BackendInfo

    infos: dict[str, BackendInfo] = {}
    for impl in reversed(pm.hook.runjob_backend_info.get_hookimpls()):
        info = impl.function()
        if isinstance(info, BackendInfo):
            infos.setdefault(info.name, info)
    return infos


def call_each(caller: Any, kwargs: dict[str, Any], *, on_error: Any, firstresult: bool = False,
              answered: list[Any] | None = None, blame: str | None = None, on_expected: Any = None) -> list[Any]:
    """Call every implementation behind *caller* on its own, as pluggy would (same order,
    same argument subset), so that one plugin raising does not take the others down.

    *on_error(plugin_name, exc)* is called for an implementation that raised anything but
    a :class:`~runjob_core.errors.RunjobError` (those are expected failures and propagate).
    Wrappers cannot be isolated this way: with one present the hook is called as a whole,
    and what it raises is put down to *blame* (the job's backend) or "a hook wrapper".
    *answered*, if given, receives the plugin object of every implementation that answered.
    *on_expected(plugin_name, exc)*, if given, takes a RunjobError instead of letting it
    propagate, and the other implementations are still called (a hook whose answers are
    not needed to go on: ``runjob_collected``).
    """
    from runjob_core.errors import RunjobError

    impls = caller.get_hookimpls()
    if any(impl.wrapper or impl.hookwrapper for impl in impls):
        try:
            result = caller(**kwargs)
        except RunjobError as exc:
            if on_expected is None:
                raise
            on_expected(blame or "a hook wrapper", exc)
            return []
        except Exception as exc:  # a plugin bug somewhere in the chain: reported by on_error
            on_error(blame or "a hook wrapper", exc)
            return []
        if firstresult:
            return [] if result is None else [result]
        return list(result)
    results = []
    for impl in reversed(impls):
        try:
            answer = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except RunjobError as exc:
            if on_expected is None:
                raise
            on_expected(impl.plugin_name, exc)
            continue
        except Exception as exc:  # a plugin bug: reported by on_error, the others carry on
            on_error(impl.plugin_name, exc)
            continue
        if answer is not None:
            results.append(answer)
            if answered is not None:
                answered.append(impl.plugin)
            if firstresult:
                break
    return results


def routed(pm: pluggy.PluginManager, hook_name: str, backend: str) -> Any:
    """The hook caller for *hook_name* with every backend except *backend* removed."""
    others = [
        pm.get_plugin(name)
        for name in backend_names(pm)
        if name != backend
    ]
    return pm.subset_hook_caller(hook_name, remove_plugins=[p for p in others if p is not None])


def flatten(results: Iterable[Iterable[Any] | None]) -> list[Any]:
    """Flatten the answers of a 1:N hook whose implementations return iterables."""
    return [item for answer in results if answer is not None for item in answer]
