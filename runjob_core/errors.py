"""The one exception hierarchy of runjob.

Expected failures (bad input, an unreachable host, a scheduler that says no) are
:class:`RunjobError` subclasses: the CLI prints their message on one line and exits 1,
with no traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class RunjobError(Exception):
    """An expected failure whose message tells the user what to do."""


class ConfigError(RunjobError):
    """A configuration or job file is invalid; carries one line per problem."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"invalid {source}:\n{lines}" if len(self.problems) > 1 else f"{self.problems[0]}")


class UnknownBackendError(RunjobError):
    """A cluster names a backend type that no installed plugin provides."""


class BackendError(RunjobError):
    """A backend refused or failed an operation (sbatch rejected, pod not created, ...)."""


class TransportError(RunjobError):
    """A host could not be reached, authenticated or used."""


class HostKeyMismatch(TransportError):
    """The host showed another key than the one recorded for it in *known_hosts*: the host
    changed, or someone is in the way. Never retried and never accepted silently.

    *advice* is the last part of the message, what the user should do; a plugin that pins
    keys itself (RunPod pins a pod's key when it creates the pod) passes its own to
    :class:`runjob_core.transport.ssh.SSHTransport` rather than rewording this error.
    """

    DEFAULT_ADVICE = "verify it with the cluster's admins before updating known_hosts"

    def __init__(self, host: str, port: int, known_hosts: str | None, advice: str | None = None) -> None:
        self.host, self.port, self.known_hosts = host, port, known_hosts
        self.advice = advice or self.DEFAULT_ADVICE
        super().__init__(f"the host key of {host}:{port} does not match known_hosts ({known_hosts}): "
                         f"it changed or someone is in the way; {self.advice}")


class JobNotFoundError(RunjobError):
    """No job in the state store matches the given id or name."""


class WaitTimeoutError(RunjobError, TimeoutError):
    """Jobs were still running when a wait's timeout ran out (they keep running). Also a
    :class:`TimeoutError`, so ``except TimeoutError`` works as well as ``except RunjobError``."""


class RefusedError(RunjobError):
    """Pre-flight refused to submit a job; the message says why and what to change."""
