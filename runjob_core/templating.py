"""The Jinja2 environment job scripts are rendered with.

Search order: the user's ``.runjob/templates/``, then each plugin package's
``templates/`` folder, then the core's. ``StrictUndefined`` turns a missing variable into
an error instead of an empty ``#SBATCH`` line, and the ``sh`` filter shell-quotes a
value: every value that lands in a shell line passes through it.
"""

from __future__ import annotations

import importlib.resources
import os
import shlex
from pathlib import Path
from typing import Any

import jinja2

from runjob_core.errors import ConfigError


def shell_quote(value: Any) -> str:
    if value is None:
        return "''"
    if isinstance(value, bool):
        value = "1" if value else "0"
    return shlex.quote(str(value))


def _seconds(value: Any) -> int:
    """A duration (``20m``, ``1:30:00``, a number of minutes) in seconds, for shell arithmetic."""
    from runjob_core.config import parse_duration

    return parse_duration(value)


def template_dirs_of(plugin: Any) -> list[str]:
    """The templates folder a plugin's package brings (``<package>/templates``), if any."""
    package = getattr(plugin, "__package__", None) or getattr(plugin, "__name__", None)
    if not package or package.startswith("runjob_core"):
        return []
    try:
        folder = importlib.resources.files(package) / "templates"
    except (ModuleNotFoundError, TypeError):
        return []
    return [str(folder)] if folder.is_dir() else []


def _plugin_template_dirs(plugins: list[Any]) -> list[str]:
    return [folder for plugin in plugins for folder in template_dirs_of(plugin)]


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    # Compiling the three templates costs ~50 ms per command; the cache is keyed by each
    # template's source checksum, so an edited template is recompiled.
    # Bytecode is run as code: only from a folder nobody else can write to.
    from runjob_core.config.cache import is_private_dir

    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "runjob" / "jinja"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder)) if is_private_dir(folder) else None


def make_environment(*, user_dir: Path | None = None, plugins: list[Any] = ()) -> jinja2.Environment:
    search = []
    if user_dir is not None and user_dir.is_dir():
        search.append(str(user_dir))
    search += _plugin_template_dirs(list(plugins))
    search.append(str(importlib.resources.files("runjob_core") / "templates"))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(search),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sh"] = shell_quote
    env.filters["seconds"] = _seconds
    return env


def render(env: jinja2.Environment, name: str, variables: dict[str, Any], *, job_source: str) -> str:
    try:
        return env.get_template(name).render(**variables)
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(job_source, [f"template {exc.name!r} not found (searched: {', '.join(env.loader.searchpath)})"]) from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(
            job_source,
            [f"template {name!r} needs a value that is not set: {exc.message}; set it in {job_source} or fix the template"],
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(job_source, [f"template syntax error in {exc.filename or exc.name} line {exc.lineno}: {exc.message}"]) from None
