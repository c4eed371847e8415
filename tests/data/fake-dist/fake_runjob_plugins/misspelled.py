from runjob_core import hookimpl


@hookimpl
def runjob_sumbit(job, rendered, cluster, context):
    return None
