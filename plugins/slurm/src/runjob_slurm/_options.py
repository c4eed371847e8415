"""The SLURM keys of a cluster entry: runjob-slurm's declared options.

Users write them flat beside the core's keys, as they always have::

    clusters:
      della:
        type: slurm
        host: della.example.edu
        default_partition: gpu
        default_account: mylab
        gres_format: typed
        modules: [cuda/12.4]

The core structures them into :class:`SlurmOptions` and hands it to every hook as
``cluster.options``; code of this plugin reads it through :func:`of` (which also serves a
cluster built in code without options).
"""

from __future__ import annotations

import attrs

from runjob_core.config.options import ClusterOptions, option, options_of


@attrs.frozen
class SlurmOptions(ClusterOptions):
    """The keys of a ``type: slurm`` cluster beside the core's."""

    default_partition: str | None = option(None, example="gpu",
                                           help="for jobs without resources.partition (unset: SLURM's default)")
    default_account: str | None = option(None, example="mylab",
                                         help="for jobs without resources.account (unset: your default)")
    gres_format: str = option("typed", choices=("typed", "generic"),
                              help="typed: --gres=gpu:h100:N ; generic: --gres=gpu:N")
    modules: tuple[str, ...] = option((), example=["cuda/12.4"], help="loaded before the job (module load ...)")

    def describe(self, job):
        if job is None:  # the cluster alone: what it sets
            return [(label, value) for label, value in (("partition", self.default_partition),
                                                         ("account", self.default_account)) if value]
        return [("partition", job.resources.partition or self.default_partition or "(default)"),
                ("account", job.resources.account or self.default_account or "(default)")]

    def partition(self, job) -> str | None:
        """The partition *job* asks for: its own, else the cluster's default (None: SLURM's)."""
        return job.resources.partition or self.default_partition

    def account(self, job) -> str | None:
        return job.resources.account or self.default_account


def of(cluster) -> SlurmOptions:
    """*cluster*'s SLURM options (their defaults for a cluster built in code without them)."""
    return options_of(cluster, SlurmOptions)
