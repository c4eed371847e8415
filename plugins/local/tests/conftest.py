"""The runjob test kit's fixtures (runjob_home, runjob_pm, fake_run, runjob_cli) for these tests.

A third-party backend copies this file beside its tests (see docs/plugin-authors.md). In
its own repository ``pytest_plugins = ["runjob_core.testing"]`` does the same; here, inside
runjob's repository, the root conftest already loads the kit and pytest forbids
``pytest_plugins`` in a nested conftest, so the fixtures are imported by name.
"""

from runjob_core.testing import fake_run, runjob_cli, runjob_home, runjob_pm  # noqa: F401 - pytest fixtures
