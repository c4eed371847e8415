"""A third-party health checker: finds FAKE-PROBLEM lines (for `runjob health scan`)."""
from runjob_core import hookimpl
from runjob_core.models import Finding


@hookimpl
def runjob_check_health(submission, window, context):
    pad = context.scratchpad("fakechecker")
    seen = pad.get(submission.tag, 0)
    findings = []
    for number, line in enumerate(window.splitlines(), start=seen + 1):
        if "FAKE-PROBLEM" in line:
            findings.append(Finding(label="fake_problem", severity="warning", message="a fake problem", action="warn",
                                    source="fakechecker", line=number, text=line))
    pad[submission.tag] = seen + len(window.splitlines())
    return findings
