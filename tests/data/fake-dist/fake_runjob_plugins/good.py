"""A well-behaved third-party backend for loader tests (no real jobs)."""
from runjob_core import hookimpl


@hookimpl
def runjob_submit(job, attempt, rendered, cluster, context):
    return attempt.submission(backend="fakegood", cluster=cluster.name, backend_job_id="fake-1", source="fakegood")
