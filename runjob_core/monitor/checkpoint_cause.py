"""Why a job that stopped early has no checkpoint to resume from, in words a refusal can carry.

The monitor refuses a resume after two attempts without progress; "no progress" alone
sends the user to the wrong place when the job did save, but in a form runjob cannot use.
This looks at the attempt's checkpoint folder (the same rules as
:func:`runjob_core.defaults.runjob_resume`) and names the cause.
"""

from __future__ import annotations

from runjob_core.errors import RunjobError

#: Folder names listed in a cause, at most.
_SHOWN = 4


def explain(context, submission) -> str | None:
    """One sentence on the checkpoint folder of *submission*, or None when it cannot be read."""
    root = submission.checkpoint_dir
    if not root:
        return None
    try:
        listing = context.transport_for(submission).listdir_recursive(root)
    except (RunjobError, OSError):
        return None  # the cause is a courtesy: the refusal stands without it
    folders: dict[str, set[str]] = {}
    for info in listing:
        name, _, rest = info.path.partition("/")
        if rest:
            folders.setdefault(name, set()).add(rest)
    if not folders:
        return (f"the checkpoint folder {root} holds no checkpoint: save into $RUNJOB_CHECKPOINT_DIR "
                "(Trainer: output_dir=os.environ['RUNJOB_CHECKPOINT_DIR'])")
    bare = sorted((n for n, files in folders.items() if ".runjob_complete" not in files and "trainer_state.json" not in files),
                  key=_step_order)
    if bare:
        shown = ", ".join(bare[:_SHOWN]) + (f" and {len(bare) - _SHOWN} more" if len(bare) > _SHOWN else "")
        return (f"checkpoint folders without trainer_state.json or runjob's .runjob_complete marker in {root}: {shown}. "
                "Trainer writes trainer_state.json last, so its folders without it are saves cut short; a job that "
                "saves its own way marks each finished save with runjob_core.job.checkpoint_saved")
    return (f"the checkpoints in {root} ({', '.join(sorted(folders, key=_step_order)[:_SHOWN])}) failed the completeness "
            "check (a marker whose files changed size, a trainer_state.json whose global_step is not the folder's, "
            "or a torn .safetensors header)")


def _step_order(name: str) -> tuple[int, str]:
    tail = name.rsplit("-", 1)[-1]
    return (int(tail) if tail.isdigit() else -1, name)
