"""A health checker with a bug: it raises on every window (for the plugin-error tests)."""

from runjob_core import hookimpl


@hookimpl
def runjob_check_health(window):
    if window:
        raise KeyError("the checker's own bug")
