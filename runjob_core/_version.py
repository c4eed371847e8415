"""runjob's version, kept in one place: pyproject.toml reads it from here.

A plain constant rather than ``importlib.metadata.version()``: the job script records the
version on every render, and asking the metadata costs ~20 ms of every submit."""

__version__ = "0.2.0"
