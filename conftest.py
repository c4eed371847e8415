pytest_plugins = ["runjob_core.testing", "runjob_slurm.testing"]
