"""The first attempts and scripts of an array's elements: made once, each element's by
putting its name and id in place of two stand-ins.

A 1,000-element sweep over ``lr`` rendered one template 1,000 times (Jinja2, ~65 us an
element: the largest single part of its submit) into scripts that differ only where the
element's name and job id appear (its ``--job-name``, log, tag and folders), and laid out
1,000 attempts whose paths differ the same way. When the elements' specs differ only in
``name`` and ``params``, and the backend declares that its scripts depend on the name and id
only through their text and not on ``params`` (``BackendInfo.scripts_by_substitution``), one
attempt and one script are made for a stand-in name and id, and each element's are those
with its own name and id put in: the same bytes as its own render, which
:func:`first_attempts` checks against real ones for the first and the last element before it
uses any. Anything else (a ``.runjob/templates`` folder, a plugin's templates whose backend
does not declare it, other fields that vary, a name or id with other characters) makes each
element's itself.

The script text with its stand-ins (:class:`ScriptModel`) goes to the backend too: SLURM
ships it once and each task makes its own script from it, where 1,000 scripts went in the
array's bundle.
"""

from __future__ import annotations

import re
import secrets

import attrs

from runjob_core import lifecycle
from runjob_core.context import RunContext
from runjob_core.models import Attempt, JobSpec, Layout, Rendered, ScriptModel
from runjob_core.store import attempt_tag

#: A name or id that reaches paths and scripts as it is: the job-name characters, which
#: neither the ``sh`` filter (``shlex.quote``) nor the ``sbatch`` one quotes or refuses, and
#: which no path join changes.
_PLAIN = re.compile(r"[A-Za-z0-9._-]+\Z")
#: A smaller array makes each element's: the stand-in and the two checks cost three renders.
_AT_LEAST = 4


@attrs.frozen
class FirstAttempts:
    """Each element's first attempt and rendered script, in order, and the model they were
    made from (None when each was made on its own)."""

    attempts: list[Attempt]
    rendereds: list[Rendered]
    model: ScriptModel | None


def first_attempts(context: RunContext, cluster, jobs: list[JobSpec], job_ids: list[str], templates) -> FirstAttempts:
    """Attempt 1 of each of *jobs* (new jobs *job_ids*) and its script, as
    :func:`lifecycle.new_attempt` and :func:`lifecycle.render` make them."""
    def own(job: JobSpec, job_id: str) -> tuple[Attempt, Rendered]:
        attempt = lifecycle.new_attempt(context, job, cluster, job_id=job_id, n=1)
        return attempt, lifecycle.render(context, job, attempt, cluster, templates=templates)

    def each() -> FirstAttempts:
        made = [own(job, job_id) for job, job_id in zip(jobs, job_ids)]
        return FirstAttempts([a for a, _r in made], [r for _a, r in made], None)

    if len(jobs) < _AT_LEAST or not _substitutable(context, cluster, jobs, job_ids):
        return each()
    # Stand-ins that appear nowhere else (random) and reach the script as they are (plain).
    name_in, id_in = f"rjname{secrets.token_hex(8)}", f"rj-id{secrets.token_hex(8)}"
    stand_in, model = own(attrs.evolve(jobs[0], name=name_in), id_in)
    script = ScriptModel(text=model.script, name_in=name_in, id_in=id_in)
    if model.files or any(name_in in text or id_in in text for text in (model.script_name, model.template, model.source)):
        return each()  # files of the template's own, or a name that varies: not shipped as one text
    paths = attrs.asdict(stand_in.layout)

    def made(job: JobSpec, job_id: str) -> tuple[Attempt, Rendered]:
        def put(text):
            return text.replace(id_in, job_id).replace(name_in, job.name) if text else text

        layout = Layout(**{key: put(value) for key, value in paths.items()})
        attempt = Attempt(job_id=job_id, n=1, tag=attempt_tag(job_id, 1), layout=layout)
        return attempt, Rendered(script=script.script_for(job.name, job_id), template=model.template, source=model.source,
                                 script_name=model.script_name)

    pairs = [made(job, job_id) for job, job_id in zip(jobs, job_ids)]
    if any(own(jobs[i], job_ids[i]) != pairs[i] for i in (0, -1)):
        return each()  # not as the backend declared: each its own
    return FirstAttempts([a for a, _r in pairs], [r for _a, r in pairs], script)


def _substitutable(context: RunContext, cluster, jobs: list[JobSpec], job_ids: list[str]) -> bool:
    """Whether the elements' attempts and scripts may be made from one (see the module's text)."""
    if not context.backend_info(cluster.type).scripts_by_substitution or not _templates_declared(context):
        return False
    if not all(_PLAIN.match(job.name) for job in jobs) or not all(map(_PLAIN.match, job_ids)):
        return False
    first = jobs[0]
    same = [f.name for f in attrs.fields(JobSpec) if f.name not in ("name", "params")]
    for job in jobs[1:]:
        for name in same:
            mine, theirs = getattr(job, name), getattr(first, name)
            if mine is not theirs and mine != theirs:  # sections no swept key touches are one object
                return False
    return True


def _templates_declared(context: RunContext) -> bool:
    """No ``.runjob/templates`` folder, and every plugin that brings templates declares
    ``scripts_by_substitution`` for its own backend (its templates could override the core's
    for every backend)."""
    if lifecycle.user_templates_dir() is not None:
        return False
    from runjob_core import templating

    for plugin in (p for _name, p in context.pm.list_name_plugin() if p is not None):
        if not templating.template_dirs_of(plugin):
            continue
        info = getattr(plugin, "runjob_backend_info", None)
        if info is None or not getattr(info(), "scripts_by_substitution", False):
            return False
    return True
