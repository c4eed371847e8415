"""A backend's own cluster keys: how a plugin declares them, and how the core checks and shows them.

A backend declares the keys its clusters take beside the core's (``host``, ``scratch_path``,
``gpu_type``...) as an attrs class, returned as ``BackendInfo(options=...)`` by its
:func:`~runjob_core.hookspecs.runjob_backend_info`. Users write those keys flat in the
cluster entry; the core structures them into that class and hands the instance to every
hook as ``cluster.options``. One field is one key::

    import attrs
    from runjob_core.config.options import ClusterOptions, option

    @attrs.frozen
    class SlurmOptions(ClusterOptions):
        default_partition: str | None = option(None, help="partition for jobs that name none")
        gres_format: str = option("typed", help="typed: --gres=gpu:TYPE:N; generic: --gres=gpu:N",
                                  choices=("typed", "generic"))

        def describe(self, job):
            return [("partition", (job and job.resources.partition) or self.default_partition or "(default)")]

What the declaration gives, with no code of the backend's:

- **name, type, default**: the field's. Values are checked strictly (a string where a
  number belongs is refused), with the core's one-line errors naming file and key path.
- **unknown keys** are refused with a did-you-mean; a key another installed backend declares
  (``default_partition`` on a ``type: local`` cluster) says whose it is.
- **help** (:func:`option`) is shown by ``runjob clusters keys TYPE`` and in the commented
  example ``runjob init`` writes; **choices** are checked when the file is loaded.
- **rules across keys**: :meth:`ClusterOptions.problems`, run when the file is loaded.
- **how a cluster is shown**: :meth:`ClusterOptions.describe`, the rows of ``runjob
  clusters`` and of the review before a submit (the core names none of a backend's keys).

An options class need not subclass :class:`ClusterOptions` (a plain attrs class works: no
rules, no rows); subclassing documents the two methods and keeps their defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    from runjob_core.models import ClusterConfig, JobSpec

T = TypeVar("T")

#: Keys of an attrs field's ``metadata`` that :func:`option` fills.
HELP = "runjob.help"
CHOICES = "runjob.choices"
EXAMPLE = "runjob.example"


def option(default: Any = attrs.NOTHING, *, help: str, choices: Sequence[Any] | None = None,  # noqa: A002 - click's word
           example: Any = None) -> Any:
    """One declared cluster key: an ``attrs.field`` with its *help* (one line), the values it
    may take (*choices*, checked on load) and an *example* value for ``runjob init``'s
    commented entry (default: the *default*). Leave *default* out for a key every cluster of
    the backend must set."""
    metadata: dict[str, Any] = {HELP: help}
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    if example is not None:
        metadata[EXAMPLE] = example
    return attrs.field(default=default, metadata=metadata)


class ClusterOptions:
    """Base of a backend's options class; both methods are optional and have defaults.

    The instance is frozen and built once per loaded file: keep the methods cheap and free
    of I/O (no connection, no environment look-up: a cluster is described by what its entry
    says)."""

    __slots__ = ()

    def problems(self, cluster: ClusterConfig) -> Iterable[tuple[str, str]]:
        """Rules across keys, run when ``clusters.yaml`` is loaded, after each key's type.

        :param cluster: The whole entry, core keys included (``cluster.options`` is *self*).
        :returns: ``(key, text)`` pairs, *key* the option (or core key) at fault and *text*
            what is wrong and how to fix it; the core prints each as ``TEXT at
            $.clusters.NAME.KEY in FILE`` and refuses the file. Empty: the entry is fine.
        """
        return ()

    def describe(self, job: JobSpec | None) -> Sequence[tuple[str, str]]:
        """How a cluster of this backend is shown: ``(label, value)`` rows.

        :param job: ``None`` for the cluster alone (``runjob clusters``: keep to one or two
            short rows); the job about to be submitted for the review table, whose own
            values (``resources.partition``...) take precedence over the cluster's defaults.
        """
        return ()


@attrs.frozen
class OptionDoc:
    """One declared key, as ``runjob clusters keys`` lists it."""

    name: str
    type: str
    default: Any
    required: bool
    help: str
    choices: tuple[Any, ...] = ()
    example: Any = None


def declared(options_cls: type | None) -> list[OptionDoc]:
    """The keys *options_cls* declares, in its field order."""
    if options_cls is None:
        return []
    docs = []
    for f in attrs.fields(options_cls):
        required = f.default is attrs.NOTHING
        default = None if required else (f.default.factory() if isinstance(f.default, attrs.Factory) else f.default)
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        example = f.metadata.get(EXAMPLE, default)
        docs.append(OptionDoc(name=f.name, type=str(kind), default=default, required=required,
                              help=f.metadata.get(HELP, ""), choices=tuple(f.metadata.get(CHOICES, ())), example=example))
    return docs


def problems(cluster: ClusterConfig, where: str, label: str) -> list[str]:
    """What is wrong with *cluster*'s structured options: values outside their declared
    choices, then the class's own rules, each as one line naming *label* and the key path."""
    options = cluster.options
    if options is None or not attrs.has(type(options)):
        return []
    found = []
    for f in attrs.fields(type(options)):
        allowed = f.metadata.get(CHOICES)
        value = getattr(options, f.name)
        if allowed and value not in allowed:
            listed = " or ".join(repr(v) for v in allowed)
            found.append(f"{f.name} must be {listed}, not {value!r} at {where}.{f.name} in {label}")
    rules = getattr(options, "problems", None)
    if callable(rules):
        for key, text in rules(cluster):
            found.append(f"{text} at {where}.{key} in {label}" if key else f"{text} at {where} in {label}")
    return found


def describe(cluster: ClusterConfig, job: JobSpec | None = None) -> list[tuple[str, str]]:
    """The backend's rows for *cluster* (and *job*, for a review); none for a backend that
    declares no options, gives no rows, or is not installed (its keys are a plain mapping)."""
    rows = getattr(cluster.options, "describe", None)
    if not callable(rows):
        return []
    return [(str(label), str(value)) for label, value in rows(job)]


def flat(cluster: ClusterConfig) -> dict[str, Any]:
    """*cluster* as its entry in ``clusters.yaml`` reads: core keys and the backend's side by
    side (``runjob clusters --json``)."""
    from runjob_core.config import unstructure

    data = unstructure(attrs.evolve(cluster, options=None))
    data.pop("options", None)
    options = cluster.options
    if attrs.has(type(options)):
        data.update(unstructure(options))
    elif isinstance(options, Mapping):
        data.update(options)
    return data


def options_of(cluster: ClusterConfig, options_cls: type[T]) -> T:
    """*cluster*'s options as *options_cls*, for a backend's own code: the instance the core
    structured from ``clusters.yaml``; the class's defaults for a cluster built in code
    without options; a mapping (built in code) structured and checked as a file would be."""
    options = cluster.options
    if isinstance(options, options_cls):
        return options
    if options is None and all(f.default is not attrs.NOTHING for f in attrs.fields(options_cls)):
        return options_cls()
    from runjob_core.config import structure
    from runjob_core.errors import ConfigError

    where = f"$.clusters.{cluster.name}"
    built = structure(dict(options or {}), options_cls, source=cluster.source, path=where)
    found = problems(attrs.evolve(cluster, options=built), where, cluster.source)
    if found:
        raise ConfigError(cluster.source, found)
    return built
