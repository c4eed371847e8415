"""Where the state lives and who writes to it (team mode, issue 27).

The state is named by a URL: ``RUNJOB_STATE_URL`` first, else the ``state:`` key of
``.runjob/config.yaml`` (the working folder's, or ``$RUNJOB_HOME/config.yaml``), else that of
``~/.config/runjob/config.yaml`` (``$XDG_CONFIG_HOME``). None of them, or an empty one, is the
embedded SQLite file (the default, zero set-up); ``sqlite:///PATH`` another file;
``postgresql://user@host:port/db`` a PostgreSQL state shared by a team. A password is never
taken from the URL into anything runjob writes: :func:`display_url` is the only form that
reaches a message, libpq reads the password from ``PGPASSWORD`` or ``~/.pgpass`` itself, and a
config file holding one is refused (a file is copied, committed and shared; ~/.pgpass is 0600).

:func:`who` is the ``user@host`` recorded on every job, attempt and event, so that members
sharing one state can tell their work apart. ``RUNJOB_USER`` / ``RUNJOB_HOST`` override the
login name and host name (two processes on one machine stand for two hosts in tests).
"""
from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from runjob_core.errors import RunjobError

_POSTGRES_SCHEMES = ("postgresql", "postgres")


def state_url() -> str | None:
    """The state URL asked for (environment, then config files), or None for the default SQLite file."""
    url = os.environ.get("RUNJOB_STATE_URL", "").strip()
    if url:
        return url
    for path in _config_files():
        url = _state_key(path)
        if url:
            return url
    return None


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.lower() in _POSTGRES_SCHEMES


def state_dir(cwd: Path | None = None) -> Path:
    """The folder holding state.db: $RUNJOB_HOME, else ./.runjob."""
    override = os.environ.get("RUNJOB_HOME")
    return Path(override) if override else (cwd or Path.cwd()) / ".runjob"


def _config_files() -> list[Path]:
    folder = state_dir()
    user = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "runjob"
    return [folder / "config.yaml", user / "config.yaml"]


def _state_key(path: Path) -> str | None:
    """The ``state:`` of one config file (None when the file or the key is absent)."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunjobError(f"cannot read {path} ({exc.strerror}): make it readable, or remove it") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RunjobError(f"{path} is not valid YAML ({str(exc).splitlines()[0]}): fix the file") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise RunjobError(f"{path} must be a mapping of keys (state: URL ...): fix the file")
    url = data.get("state")
    if url is None:
        return None
    if not isinstance(url, str):
        raise RunjobError(f"{path}: state must be a URL (postgresql://USER@HOST:PORT/DB or sqlite:///PATH)")
    if urlsplit(url.strip()).password is not None:
        raise RunjobError(f"{path}: state holds a password; remove it from the URL ({display_url(url.strip())}) and put "
                          "it in ~/.pgpass (HOST:PORT:DB:USER:PASSWORD, chmod 600) or PGPASSWORD")
    return url.strip() or None


def display_url(url: str) -> str:
    """``url`` with any password removed: the form every message and log uses."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///PATH`` URL; None when ``url`` names another kind of store.

    Bad URLs raise one line naming RUNJOB_STATE_URL, the URL (password removed) and the fix.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        path = urlsplit(url).path
        if not path:
            raise RunjobError(f"RUNJOB_STATE_URL={display_url(url)} names no file: write sqlite:///PATH/state.db")
        return path
    if scheme in _POSTGRES_SCHEMES:
        return None
    raise RunjobError(f"RUNJOB_STATE_URL={display_url(url)} is not a state URL runjob knows: use "
                      "sqlite:///PATH/state.db or postgresql://USER@HOST:PORT/DB")


def who() -> str:
    """``user@host`` of this process, as recorded on the jobs, attempts and events it writes."""
    user = os.environ.get("RUNJOB_USER", "").strip()
    if not user:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no login name (a container without /etc/passwd entry)
            user = str(os.getuid())
    return f"{user}@{host()}"


def host() -> str:
    """This host's name as the state records it (in ``who`` and in lease owners)."""
    return os.environ.get("RUNJOB_HOST", "").strip() or socket.gethostname()
