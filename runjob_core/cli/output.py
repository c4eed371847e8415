"""What a plugin's own command (``runjob <plugin> ...``) prints with: the public face of the
CLI's output helpers, so that plugins import no private module (``cli._common``).

- :data:`json_option`: the ``--json`` flag every listing command takes (``as_json``).
- :func:`print_json`: *data* as indented JSON on stdout.
- :func:`print_table`: rows as a table (values escaped for rich markup).
"""

from __future__ import annotations

from runjob_core.cli._common import json_option, print_json, print_table

__all__ = ["json_option", "print_json", "print_table"]
