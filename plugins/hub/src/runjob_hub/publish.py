"""Publish a job's results to the Hugging Face Hub as a dataset, and check what arrived.

* :func:`publish_results`: one commit with the results files and a README.md dataset card that
  says what the job was (model, benchmark, parameters, runjob id, cluster, source commit, the
  rendered script, row count, every column).
* :func:`verify_published`: download the file back from the Hub, count its rows, compare.

The job-side half (the token, Hub error messages, :class:`IncrementalUploader`) is
:mod:`runjob_core.job.hub`, shipped to compute nodes. ``huggingface_hub`` is imported inside
the functions that need it. Every Hub call gets ``endpoint=`` and ``token=`` explicitly. The
token never appears in a message, an exception or a return value.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from runjob_core.job.hub import DEFAULT_ENDPOINT, describe_hub_error, hub_endpoint, resolve_token, scrub

if TYPE_CHECKING:  # pragma: no cover
    from runjob_hub.validate import ValidationReport

__all__ = [
    "CardInfo", "DEFAULT_ENDPOINT", "PublishResult", "VerifyResult", "publish_results", "render_card", "resolve_token",
    "verify_published",
]

RESULT_SUFFIXES = (".jsonl", ".parquet", ".json", ".csv")
_TABLE_PREFERENCE = (".jsonl", ".parquet", ".csv", ".json")
_N_SAMPLES = 5


# ----------------------------------------------------------------------------------------------
# records


def _mapping(v: Any) -> dict:
    return dict(v or {})


@attrs.frozen
class CardInfo:
    """What the dataset card says about the job. Only model, benchmark and job_id are required."""

    model: str
    benchmark: str
    job_id: str
    attempts: int = 1
    parameters: dict[str, Any] = attrs.field(factory=dict, converter=_mapping)
    cluster: str | None = None
    git_commit: str | None = None  # commit of the user's repository, if the job came from one
    git_dirty: bool = False
    git_remote: str | None = None
    script: str | None = None  # the rendered job script
    columns: dict[str, str] = attrs.field(factory=dict, converter=_mapping)  # column -> description
    title: str | None = None
    description: str | None = None
    license: str | None = None
    tags: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    results_file: str | None = None  # the table the card describes; default: the main results file
    tasks: dict[str, dict[str, float]] = attrs.field(factory=dict)  # a harness's aggregate scores per task


@attrs.frozen
class PublishResult:
    repo_id: str
    url: str
    revision: str
    commit_sha: str
    files: tuple[str, ...] = attrs.field(converter=tuple)
    rows: int | None


@attrs.frozen
class VerifyResult:
    ok: bool
    remote_rows: int | None
    local_rows: int
    samples: tuple[dict, ...] = attrs.field(converter=tuple)
    message: str


# ----------------------------------------------------------------------------------------------
# tokens and errors


class _HubErrors:
    """``with _HubErrors(...):`` turns huggingface_hub / network exceptions into RunjobError."""

    def __init__(self, endpoint: str, repo_id: str, token: str | None, **ctx: Any) -> None:
        self.endpoint, self.repo_id, self.token, self.ctx = endpoint, repo_id, token, ctx

    def __enter__(self) -> _HubErrors:
        return self

    def __exit__(self, etype, exc, tb) -> bool:
        from runjob_core.errors import RunjobError

        if exc is None or isinstance(exc, RunjobError) or not isinstance(exc, Exception):
            return False
        msg, _ = describe_hub_error(exc, endpoint=self.endpoint, repo_id=self.repo_id, token=self.token, **self.ctx)
        # "from None": the client's exception holds the request (with its Authorization header)
        raise RunjobError(msg) from None


def _need_token(token: str | None, endpoint: str, repo_id: str) -> str:
    from runjob_core.errors import RunjobError

    tok = resolve_token(token)
    if not tok:
        org = repo_id.split("/")[0]
        raise RunjobError(f"no Hugging Face token for {endpoint}: set HF_TOKEN to a token with write access to {org} "
                          f"(or run `hf auth login`)")
    return tok


def _import_hub():
    from runjob_core.errors import RunjobError

    try:
        import huggingface_hub
    except ImportError:
        raise RunjobError("publishing to the Hub needs huggingface_hub: pip install 'runjob-core[hub]'") from None
    return huggingface_hub


# ----------------------------------------------------------------------------------------------
# publish


def _find_files(folder: Path, files: list[str] | None) -> list[tuple[str, Path]]:
    """``(path in repo, local path)`` for each results file."""
    from runjob_core.errors import RunjobError

    if files is not None:
        out = []
        for f in files:
            p = Path(f)
            local = p if p.is_absolute() else folder / p
            if not local.is_file():
                raise RunjobError(f"results file not found: {local}")
            try:
                rel = local.resolve().relative_to(folder.resolve()).as_posix()
            except ValueError:
                rel = local.name  # outside the folder: upload it at the top level
            out.append((rel, local))
    else:
        out = []
        for local in sorted(folder.rglob("*")):
            rel = local.relative_to(folder)
            if (local.is_file() and local.suffix.lower() in RESULT_SUFFIXES
                    and not any(part.startswith(".") for part in rel.parts)):
                out.append((rel.as_posix(), local))
    if not out:
        raise RunjobError(f"no results files ({', '.join(RESULT_SUFFIXES)}) in {folder}")
    names = [r for r, _ in out]
    if "README.md" in names or len(set(names)) != len(names):
        raise RunjobError("results files must have distinct names other than README.md")
    return out


def _main_table(card: CardInfo, files: list[tuple[str, Path]]) -> tuple[str, Path] | None:
    from runjob_core.errors import RunjobError

    if card.results_file:
        for rel, local in files:
            if rel == card.results_file or local.name == card.results_file:
                return rel, local
        raise RunjobError(f"CardInfo.results_file {card.results_file!r} is not among the uploaded files")
    for suffix in _TABLE_PREFERENCE:
        cands = [(r, p) for r, p in files if p.suffix.lower() == suffix]
        if cands:
            named = [c for c in cands if "result" in c[0].lower()]
            return (named or cands)[0]
    return None


def _describe_table(path: Path) -> tuple[int | None, dict[str, str], Any]:
    """(rows, column types, validation report or None) for the card."""
    from runjob_hub import validate

    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".parquet", ".json"):
        try:
            report = validate.validate_results(path)
        except Exception:  # noqa: BLE001 - a file validate cannot read is still published, just not described
            return None, {}, None
        return report.rows, dict(report.columns), report
    if suffix == ".csv":
        import csv

        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            header = next(csv.reader(fh), [])
        return validate.count_rows(path), {c: "string" for c in header}, None
    return None, {}, None


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


def _size_category(rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")):
        if rows < limit:
            return label
    return "1B<n<10B"


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") if s else ""


def render_card(card: CardInfo, *, repo_id: str, files: list[tuple[str, int]], table: str | None,
                rows: int | None, columns: dict[str, str], report: ValidationReport | None = None) -> str:
    """The README.md text: YAML metadata, then what the job was and what every column means.

    ``files`` is ``[(path in repo, size in bytes)]``; ``table`` the file ``rows``/``columns`` describe.
    """
    import yaml

    meta: dict[str, Any] = {"pretty_name": card.title or f"{card.model} on {card.benchmark}"}
    if card.license:
        meta["license"] = card.license
    tags = ["runjob", "evaluation"] + [t for t in (_slug(card.benchmark),) if t] + list(card.tags)
    meta["tags"] = list(dict.fromkeys(tags))
    if rows is not None:
        meta["size_categories"] = [_size_category(rows)]
    if table is not None and Path(table).suffix.lower() in (".jsonl", ".parquet", ".csv"):
        meta["configs"] = [{"config_name": "default", "data_files": [{"split": "train", "path": table}]}]
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).strip()

    out = [f"---\n{front}\n---", "", f"# {meta['pretty_name']}", ""]
    out.append(card.description.strip() if card.description else
               f"Results of running `{card.model}` on **{card.benchmark}**, produced and published by runjob "
               f"(job `{card.job_id}`).")
    out += ["", "## Job", "", "| | |", "|---|---|"]
    facts = [("Model", f"`{_cell(card.model)}`"), ("Benchmark", _cell(card.benchmark)),
             ("runjob job", f"`{_cell(card.job_id)}` ({card.attempts} attempt{'s' if card.attempts != 1 else ''})")]
    if card.cluster:
        facts.append(("Cluster", _cell(card.cluster)))
    if card.git_commit:
        src = f"`{_cell(card.git_commit)}`" + (" (with uncommitted changes)" if card.git_dirty else "")
        if card.git_remote:
            src += f" of {_cell(card.git_remote)}"
        facts.append(("Source commit", src))
    if rows is not None:
        facts.append(("Rows", f"{rows:,} (in `{table}`)"))
    facts.append(("Published", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    out += [f"| {k} | {v} |" for k, v in facts]

    if card.parameters:
        out += ["", "## Parameters", "", "| Parameter | Value |", "|---|---|"]
        for k, v in card.parameters.items():
            val = v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
            out.append(f"| `{_cell(k)}` | `{_cell(val)}` |")

    if card.tasks:
        out += ["", "## Scores", "", "The harness's own aggregate scores, as it wrote them.", "",
                "| Task | Metric | Value |", "|---|---|---|"]
        for task, metrics in card.tasks.items():
            out += [f"| {_cell(task)} | {_cell(metric)} | {value:g} |" for metric, value in metrics.items()]

    out += ["", "## Files", ""]
    for name, size in files:
        out.append(f"- `{name}` ({_size(size)})" + (f": {rows:,} rows" if name == table and rows is not None else ""))

    if columns or card.columns:
        out += ["", f"## Columns of `{table}`" if table else "## Columns", "",
                "| Column | Type | Description |", "|---|---|---|"]
        inferred = False
        for name, typ in columns.items():
            doc = card.columns.get(name)
            if doc:
                out.append(f"| `{_cell(name)}` | {typ} | {_cell(doc)} |")
            else:
                inferred = True
                out.append(f"| `{_cell(name)}` | {typ} | *inferred: not documented by the job* |")
        for name, doc in card.columns.items():
            if name not in columns:
                out.append(f"| `{_cell(name)}` | (absent) | {_cell(doc)} *(documented but not found in the data)* |")
        out += ["", "Types are inferred from the data."
                + (" Columns marked *inferred* have no description from the job." if inferred else "")]

    if report is not None:
        out += ["", "## Checks", ""]
        if not report.problems:
            out.append(f"runjob validated `{table}` before publishing: no problems found.")
        else:
            out.append(f"runjob validated `{table}` before publishing "
                       f"({len(report.errors)} error(s), {len(report.warnings)} warning(s)):")
            out.append("")
            out += [f"- **{p.severity}**: {_cell(p.message)}" for p in report.problems]
        extra = []
        if report.score_range is not None:
            extra.append(f"`{report.score_field}` ranges {report.score_range[0]:g}..{report.score_range[1]:g}"
                         + (f", mean {report.score_mean:.4g}" if report.score_mean is not None else ""))
        if report.token_range is not None:
            extra.append(f"`{report.token_field}` ranges {report.token_range[0]}..{report.token_range[1]}")
        if extra:
            out += ["", "; ".join(extra) + "."]

    if card.script:
        fence = "```"
        while fence in card.script:
            fence += "`"
        out += ["", "## Job script", "", "<details>", "<summary>The rendered job script</summary>", "",
                f"{fence}bash", card.script.rstrip("\n"), fence, "", "</details>"]
    return "\n".join(out) + "\n"


def publish_results(
    folder: Path,
    repo_id: str,
    *,
    card: CardInfo,
    endpoint: str | None,
    token: str | None,
    private: bool = True,
    revision: str | None = None,
    files: list[str] | None = None,
) -> PublishResult:
    """Create the dataset repo ``repo_id`` (if needed) and commit the results files and a card.

    ``files`` are paths relative to ``folder`` (default: every .jsonl/.parquet/.json/.csv under it).
    With ``revision``, the branch is created if needed and the commit goes there (canary runs).
    Returns a :class:`PublishResult`; raises :class:`RunjobError` with a one-line message.
    """
    from runjob_core.errors import RunjobError

    folder = Path(folder)
    if not folder.is_dir():
        raise RunjobError(f"results folder not found: {folder}")
    if not isinstance(card, CardInfo):
        raise TypeError("card must be a CardInfo")
    endpoint = hub_endpoint(endpoint)
    hf = _import_hub()
    tok = _need_token(token, endpoint, repo_id)
    found = _find_files(folder, files)
    table = _main_table(card, found)
    rows, columns, report = _describe_table(table[1]) if table else (None, {}, None)
    readme = render_card(card, repo_id=repo_id, files=[(r, p.stat().st_size) for r, p in found],
                         table=table[0] if table else None, rows=rows, columns=columns, report=report)

    api = hf.HfApi(endpoint=endpoint, token=tok, library_name="runjob")
    ops = [hf.CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(local)) for rel, local in found]
    ops.append(hf.CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=readme.encode()))
    with _HubErrors(endpoint, repo_id, tok, revision=revision):
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True, token=tok)
        if revision:
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True, token=tok)
        info = api.create_commit(
            repo_id, repo_type="dataset", operations=ops, revision=revision, token=tok,
            commit_message=f"runjob: results of {card.job_id} ({card.model} on {card.benchmark})",
            commit_description=f"Published by runjob from job {card.job_id}"
                               + (f" (source commit {card.git_commit})" if card.git_commit else "") + ".",
        )
    url = f"{endpoint}/datasets/{repo_id}" + (f"/tree/{revision}" if revision else "")
    return PublishResult(repo_id=repo_id, url=url, revision=revision or "main", commit_sha=info.oid,
                                files=[r for r, _ in found] + ["README.md"], rows=rows)


# ----------------------------------------------------------------------------------------------
# verify


def _sample_indices(n: int, k: int = _N_SAMPLES) -> list[int]:
    k = min(k, n)
    if k <= 1:
        return list(range(k))
    return sorted({round(j * (n - 1) / (k - 1)) for j in range(k)})


def _rows_and_samples(path: Path, suffix: str) -> tuple[int, list[dict]]:
    from runjob_hub import validate

    if suffix == ".parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        n = pf.metadata.num_rows
        if not n:
            return 0, []
        table = pf.read()
        return n, [table.slice(i, 1).to_pylist()[0] for i in _sample_indices(n)]
    if suffix == ".csv":
        import csv

        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            rows = list(csv.DictReader(fh))
        return len(rows), [rows[i] for i in _sample_indices(len(rows))]
    if suffix == ".json":
        data = validate.json_array(path)
        if data is not None:
            return len(data), [data[i] for i in _sample_indices(len(data))]
    n = validate.count_rows(path)
    want = set(_sample_indices(n))
    samples: list[dict] = []
    with open(path, "rb") as fh:
        i = 0
        for line in fh:
            if not line.strip():
                continue
            if i in want:
                try:
                    samples.append(json.loads(line))
                except ValueError:
                    samples.append({"_unparsed": line.decode("utf-8", "replace")[:500]})
            i += 1
    return n, samples


def verify_published(
    repo_id: str,
    *,
    endpoint: str | None,
    token: str | None,
    revision: str | None = None,
    local_rows: int,
    filename: str,
) -> VerifyResult:
    """Download ``filename`` from the Hub (fresh, into a temporary cache), count its rows and compare.

    Returns a :class:`VerifyResult` with up to 5 rows sampled evenly (first, ..., last). Raises
    :class:`RunjobError` if the file cannot be downloaded.
    """
    endpoint = hub_endpoint(endpoint)
    hf = _import_hub()
    tok = resolve_token(token)
    with tempfile.TemporaryDirectory(prefix="runjob-verify-") as tmp:
        with _HubErrors(endpoint, repo_id, tok, revision=revision, filename=filename):
            local = hf.hf_hub_download(repo_id, filename, repo_type="dataset", revision=revision,
                                       cache_dir=tmp, force_download=True, endpoint=endpoint,
                                       token=tok if tok else False, library_name="runjob")
        remote_rows, samples = _rows_and_samples(Path(local), Path(filename).suffix.lower())
    ok = remote_rows == local_rows
    where = f"{repo_id}/{filename}" + (f"@{revision}" if revision else "")
    if ok:
        message = f"verified: {where} on the Hub has {remote_rows:,} rows, like the local file"
    else:
        message = (f"row count mismatch: {where} on the Hub has {remote_rows:,} rows, the local file has "
                   f"{local_rows:,}")
    return VerifyResult(ok=ok, remote_rows=remote_rows, local_rows=local_rows, samples=samples,
                               message=message)
