"""The ``runjob`` command line: thin commands over :mod:`runjob_core.lifecycle`.

Commands are imported only when they run, and their one-line help lives here, so
``runjob --help`` imports click and nothing else: no plugin, no pluggy, no jinja2.
Expected failures (:class:`runjob_core.errors.RunjobError`) print one line and exit 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from runjob_core._version import __version__

#: name -> (module, one-line help). One module per command.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("runjob_core.cli.init", "Write a commented .runjob/clusters.yaml and an example job."),
    "run": ("runjob_core.cli.run", "Take a job from spec to verified result: pre-flight, submit, watch, collect, report."),
    "plan": ("runjob_core.cli.plan", "Show everything of pre-flight for a job, submitting nothing."),
    "render": ("runjob_core.cli.render", "Print the job script a job would run."),
    "submit": ("runjob_core.cli.submit", "Review and submit a job, then return."),
    "status": ("runjob_core.cli.status", "Show jobs and their attempts (refreshes active ones)."),
    "watch": ("runjob_core.cli.watch", "Follow jobs until they end: poll, read logs, run health checks."),
    "logs": ("runjob_core.cli.logs", "Print a job's log; -f follows it."),
    "cancel": ("runjob_core.cli.cancel", "Cancel a job's active attempt and wait until the backend confirms it ended."),
    "forget": ("runjob_core.cli.forget", "Stop following a job runjob can no longer reach (stops nothing)."),
    "collect": ("runjob_core.cli.collect", "Download a finished job's results, publish and validate them."),
    "report": ("runjob_core.cli.report", "Summarise a job: results, samples, anomalies, cost, closing line, next steps."),
    "dashboard": ("runjob_core.cli.dashboard", "Build the static dashboard of every job; --serve serves it and rebuilds."),
    "resume": ("runjob_core.cli.resume", "Resubmit a stopped job from its newest complete checkpoint."),
    "events": ("runjob_core.cli.events", "Show the activity log."),
    "plugins": ("runjob_core.cli.plugins", "List installed plugins, their hooks and load errors."),
    "clusters": ("runjob_core.cli.clusters", "List configured clusters; 'clusters check NAME' tests one."),
    "estimate": ("runjob_core.cli.estimate", "Estimate GPU memory for a model and job kind."),
    "health": ("runjob_core.cli.health", "Run the health checks on log files offline."),
    "state": ("runjob_core.cli.state", "Where the state is; 'state migrate --to URL' copies it into a shared one."),
    "reference": ("runjob_core.cli.reference", "Benchmark references: list, show, check a job, scaffold a new one."),
}


def plugin_commands() -> dict:
    """Commands plugins add (entry-point group ``runjob.commands``), by name; the core's win."""
    from runjob_core._entry_points import entry_points

    return {ep.name: ep for ep in entry_points("runjob.commands") if ep.name not in COMMANDS}


def shadowed_commands() -> list:
    """Plugin commands that a core command of the same name hides (never run)."""
    from runjob_core._entry_points import entry_points

    return [ep for ep in entry_points("runjob.commands") if ep.name in COMMANDS]


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *plugin_commands()])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is not None:
            return importlib.import_module(entry[0]).command
        plugin = plugin_commands().get(name)
        if plugin is None:
            return None
        try:
            return plugin.load()
        except Exception as exc:  # a broken plugin: say which, do not hide the other commands
            message = f"the command {name!r} of {plugin.dist} cannot be loaded ({type(exc).__name__}: {exc}); reinstall {plugin.dist}"
            raise click.ClickException(message) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Plugin commands are listed without importing them: their help says where they come from.
        from runjob_core._entry_points import command_helps

        extra, helps = plugin_commands(), command_helps()
        rows = [(name, COMMANDS[name][1] if name in COMMANDS
                 else f"{helps.get(name, '(run `runjob plugins` to describe it)')} [{extra[name].dist}]")
                for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
        hidden = shadowed_commands()
        if hidden:
            with formatter.section("Plugin commands hidden by runjob's own"):
                formatter.write_dl([(ep.name, f"from {ep.dist}: runjob's '{ep.name}' runs instead; the plugin must rename it")
                                    for ep in hidden])

    def invoke(self, ctx: click.Context):
        from runjob_core.errors import RunjobError

        try:
            return super().invoke(ctx)
        except RunjobError as exc:
            from runjob_core.redact import redact

            raise click.ClickException(redact(str(exc))) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, message="runjob %(version)s")
def cli() -> None:
    """Run ML jobs on SLURM, RunPod or this machine, from one job spec to a verified result.

    \b
    Quick start:
      runjob init                     write .runjob/clusters.yaml and examples/hello.yaml
      runjob run examples/hello.yaml --yes
    """


def main(prepared=None) -> None:
    """The CLI. *prepared*: a :class:`runjob_core.plugins.Prepared` plugin manager (the warm
    process's child), which the command's context takes instead of loading every plugin."""
    # paramiko imports `invoke` only to run `Match exec` lines of ssh_config, which runjob
    # never reads; keeping it out saves ~100 ms on every SSH command. Only in the CLI's own
    # process: a library user's later `import invoke` must keep working.
    sys.modules.setdefault("invoke", None)
    # Commands share one SSH connection per cluster through an agent (RUNJOB_SSH_AGENT=0: don't).
    os.environ.setdefault("RUNJOB_SSH_AGENT", "1")
    sys.exit(cli.main(prog_name="runjob", standalone_mode=True, obj=prepared))
