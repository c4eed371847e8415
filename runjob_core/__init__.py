"""runjob: one job specification in, a finished and verified result out.

This module imports nothing beyond the standard library: ``runjob_core.job`` is imported
by job code on compute nodes where runjob (and pluggy, attrs, ...) is not installed.
The plugin marker is therefore created lazily::

    from runjob_core import hookimpl
"""

from __future__ import annotations

from runjob_core._version import __version__

__all__ = ["hookimpl", "__version__"]


def __getattr__(name: str):
    if name == "hookimpl":
        import pluggy

        marker = pluggy.HookimplMarker("runjob")
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module 'runjob_core' has no attribute {name!r}")
