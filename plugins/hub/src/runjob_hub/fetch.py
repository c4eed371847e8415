"""A job's published results brought back from the Hub (``runjob_fetch_results``): for a
member of a team whose host cannot reach the folder another member collected them into.

The copy is the one this plugin published and recorded (the last ``ARTIFACT_HUB`` artifact
of the job: its repo, its commit and its files), read at that commit, so a later job that
publishes to the same repo does not change what this job's report reads. It is kept in the
folder the core gives (``.runjob/fetched/<job id>/``) with a note of what it holds
(``.runjob-fetched``, no suffix: the report reads every ``.json``/``.jsonl`` file there), and
not downloaded again while the note matches.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from runjob_core.models import ARTIFACT_HUB

NOTE = ".runjob-fetched"


def published_results(artifacts, dest: Path) -> Path | None:
    """*dest* holding the results files of the job's last Hub artifact, or None when it has none."""
    published = next((a for a in reversed(list(artifacts)) if a.kind == ARTIFACT_HUB), None)
    if published is None:
        return None
    repo_id = published.name
    endpoint, _, _ = published.location.partition("/datasets/")
    revision = published.data.get("commit") or published.data.get("revision") or "main"
    files = [name for name in published.data.get("files") or [] if name != "README.md"]
    note = {"repo": repo_id, "endpoint": endpoint, "revision": revision, "files": files}
    if _note(dest) == note and all((dest / name).is_file() for name in files):
        return dest  # fetched before, the same commit: nothing to download
    _download(endpoint, repo_id, revision, files, dest)
    (dest / NOTE).write_text(json.dumps(note), encoding="utf-8")
    return dest


def _note(dest: Path) -> dict | None:
    try:
        return json.loads((dest / NOTE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _download(endpoint: str, repo_id: str, revision: str, files: list[str], dest: Path) -> None:
    """Every file of *files* at *revision* into a fresh *dest* (what an earlier fetch left is replaced)."""
    from runjob_core.errors import RunjobError
    from runjob_hub.publish import _HubErrors, _import_hub, hub_endpoint, resolve_token

    endpoint = hub_endpoint(endpoint or None)
    hf = _import_hub()
    token = resolve_token(None)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="runjob-fetch-") as cache:
        for name in files:
            with _HubErrors(endpoint, repo_id, token, revision=revision, filename=name):
                local = hf.hf_hub_download(repo_id, name, repo_type="dataset", revision=revision, cache_dir=cache,
                                           endpoint=endpoint, token=token if token else False, library_name="runjob")
            target = dest / name
            if not target.resolve().is_relative_to(dest.resolve()):  # publish never records such a name
                raise RunjobError(f"the Hub artifact of {repo_id} names a file outside its folder ({name!r}); "
                                  "not fetched")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, target)
