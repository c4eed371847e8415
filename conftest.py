pytest_plugins = ["runjob_core.testing"]
