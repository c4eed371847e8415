"""Talking to the Hugging Face Hub from inside a job: the token, error messages, and the
incremental uploader that pushes a growing results file now and then.

Standard library only at import time: this package is shipped whole to compute nodes that
may have nothing else installed. ``huggingface_hub`` is imported where it is used (the job
needs it only if it uploads). The host side of publishing (dataset card, verify) is the
``runjob-hub`` plugin, which uses the helpers here too.

The token never appears in a message, an exception or a return value.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEFAULT_ENDPOINT", "IncrementalUploader", "after_last_newline", "describe_hub_error", "resolve_token", "scrub"]

DEFAULT_ENDPOINT = "https://huggingface.co"
_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{8,}")


def resolve_token(token: str | None = None) -> str | None:
    """The explicit token, else ``HF_TOKEN``, else the Hub's saved login (``huggingface_hub.get_token()``)."""
    if token:
        return token
    env = os.environ.get("HF_TOKEN")
    if env:
        return env
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    try:
        return get_token()
    except Exception:  # noqa: BLE001 - e.g. an OIDC exchange failing: treat as "no token"
        return None


def scrub(text: str, token: str | None) -> str:
    if token:
        text = text.replace(token, "***")
    return _TOKEN_RE.sub("hf_***", text)


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _network_error(exc: BaseException) -> BaseException | None:
    """The connection-level error in ``exc``'s chain, if the Hub could not be reached at all."""
    try:
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:  # pragma: no cover
        HfHubHTTPError = ()  # type: ignore[assignment]  # noqa: N806
    for e in _chain(exc):
        if isinstance(e, HfHubHTTPError):
            return None
        mod = type(e).__module__ or ""
        names = {c.__name__ for c in type(e).__mro__}
        if mod.startswith(("httpx", "httpcore")) and names & {"TransportError", "NetworkError", "TimeoutException"}:
            return e
        if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ == "gaierror":
            if "HTTP status" in str(e):  # hf_xet reports server answers as ConnectionError
                return None
            return e
    return None


def _status(exc: BaseException) -> int | None:
    resp = getattr(exc, "response", None)
    return getattr(resp, "status_code", None)


def _first_line(exc: BaseException) -> str:
    try:
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:  # pragma: no cover
        HfHubHTTPError = ()  # type: ignore[assignment]  # noqa: N806
    server = getattr(exc, "server_message", None) if isinstance(exc, HfHubHTTPError) else None
    text = server or str(exc) or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def describe_hub_error(exc: BaseException, *, endpoint: str, repo_id: str, token: str | None,
                       revision: str | None = None, filename: str | None = None) -> tuple[str, bool]:
    """``(one-line message, retryable)`` for an exception from huggingface_hub. Never contains the token."""
    from huggingface_hub import errors as hf

    org = repo_id.split("/")[0] if "/" in repo_id else repo_id
    net = _network_error(exc)
    # the client sometimes wraps the HTTP error (e.g. "Force download failed due to the above error")
    exc = next((e for e in _chain(exc) if isinstance(e, hf.HfHubHTTPError)), exc)
    status = _status(exc)
    if net is not None:
        reason = _first_line(net)
        msg, retry = f"cannot reach the Hub at {endpoint}: {type(net).__name__}: {reason}", True
    elif isinstance(exc, hf.LocalEntryNotFoundError):
        msg, retry = f"cannot reach the Hub at {endpoint} to download {filename or 'the file'}", True
    elif status in (401, 403) and not isinstance(exc, (hf.GatedRepoError, hf.RevisionNotFoundError,
                                                         hf.RemoteEntryNotFoundError)):
        if status == 401 and isinstance(exc, hf.RepositoryNotFoundError) and token is None:
            msg = f"no Hugging Face token was sent to {endpoint} (401): set HF_TOKEN to a token with write access to {org}"
        else:
            msg = f"the Hub rejected the token for {endpoint} ({status}): set HF_TOKEN to a token with write access to {org}"
        retry = False
    elif isinstance(exc, hf.GatedRepoError):
        msg, retry = f"dataset {repo_id} on {endpoint} is gated: request access or use another token", False
    elif isinstance(exc, hf.RevisionNotFoundError):
        msg, retry = f"branch or revision {revision or 'main'!r} not found in dataset {repo_id} on {endpoint}", False
    elif isinstance(exc, hf.RemoteEntryNotFoundError):
        msg, retry = f"{filename or 'the file'} not found in dataset {repo_id} on {endpoint}", False
    elif isinstance(exc, hf.RepositoryNotFoundError):
        msg = (f"dataset {repo_id} not found on {endpoint} (or the token cannot see it): check the name and that "
               f"HF_TOKEN can read {org}")
        retry = False
    elif isinstance(exc, hf.HfHubHTTPError):
        msg = f"the Hub at {endpoint} answered {status or 'an error'} for {repo_id}: {_first_line(exc)}"
        retry = status is None or status >= 500 or status in (408, 429)
    elif isinstance(exc, ValueError):
        msg, retry = f"the Hub at {endpoint} refused the request for {repo_id}: {_first_line(exc)}", False
    else:
        msg, retry = f"Hub operation on {repo_id} at {endpoint} failed: {type(exc).__name__}: {_first_line(exc)}", True
    return scrub(msg, token), retry


class IncrementalUploader:
    """Push a growing results file to the Hub from inside a job, now and then. Never raises.

    Call :meth:`maybe_upload` as often as you like (e.g. after every row). It uploads only when

    * the file changed since the last upload (size + mtime, then the sha256 of the content), and
    * a threshold is met: ``every_seconds`` since the last upload, or ``every_rows`` new rows
      (either one; with neither, every change is uploaded), or ``force=True`` (end of the job).

    Only complete lines are uploaded (a line being written is left for next time, unless
    ``force``). A Hub error is retried ``max_attempts`` times with exponential backoff
    (``backoff_seconds``, doubling, at most 30 s); if it persists, the message is kept in
    :attr:`last_error` (and :attr:`failures` counts), nothing is raised, and the next attempt
    waits ``retry_after_seconds``. Errors that retrying cannot fix (bad token, missing repo)
    are not retried.

    Note: the huggingface_hub client itself retries some requests (preupload, LFS) on 5xx for
    up to ~20 s, so one call can block that long while the Hub is down.
    """

    def __init__(
        self,
        path: Path | str,
        repo_id: str,
        *,
        endpoint: str | None,
        token: str | None,
        every_seconds: float | None = None,
        every_rows: int | None = None,
        revision: str | None = None,
        path_in_repo: str | None = None,
        private: bool = True,
        max_attempts: int = 3,
        backoff_seconds: float = 2.0,
        retry_after_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = Path(path)
        self.repo_id = repo_id
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        self._token = token
        self.every_seconds = every_seconds
        self.every_rows = every_rows
        self.revision = revision
        self.path_in_repo = path_in_repo or self.path.name
        self.private = private
        self.max_attempts = max(1, max_attempts)
        self.backoff_seconds = backoff_seconds
        self.retry_after_seconds = retry_after_seconds
        self._clock, self._sleep = clock, sleep
        # public state
        self.last_error: str | None = None
        self.uploads = 0
        self.failures = 0
        self.last_commit: str | None = None
        self.uploaded_rows = 0
        # private state
        self._last_upload_at = clock()
        self._retry_at: float | None = None
        self._seen_stat: tuple[int, int] | None = None  # (size, mtime_ns) at the last upload or unchanged check
        self._last_sha: str | None = None
        self._counted_bytes = 0  # rows counted incrementally for every_rows
        self._counted_rows = 0
        self._repo_ready = False

    def __repr__(self) -> str:  # no token
        return (f"IncrementalUploader({str(self.path)!r}, {self.repo_id!r}, uploads={self.uploads}, "
                f"last_error={self.last_error!r})")

    def maybe_upload(self, *, force: bool = False) -> bool:
        """Upload if due; True if an upload happened. Never raises (except KeyboardInterrupt and the like)."""
        try:
            return self._maybe_upload(force)
        except Exception as e:  # noqa: BLE001 - the job must not die because of the Hub
            self._failed(f"{type(e).__name__}: {scrub(str(e), self._token)}")
            return False

    # -- internals

    def _failed(self, message: str) -> None:
        self.last_error = message
        self.failures += 1
        self._retry_at = self._clock() + self.retry_after_seconds

    def _rows_now(self, size: int) -> int:
        """Complete lines in the file, counted incrementally (the file is expected to only grow)."""
        if size < self._counted_bytes:
            self._counted_bytes = self._counted_rows = 0
        with open(self.path, "rb") as fh:
            fh.seek(self._counted_bytes)
            left = size - self._counted_bytes
            while left > 0:
                block = fh.read(min(left, 1 << 20))
                if not block:
                    break
                self._counted_rows += block.count(b"\n")
                self._counted_bytes += len(block)
                left -= len(block)
        return self._counted_rows

    def _due(self, now: float, size: int) -> bool:
        if self.every_seconds is None and self.every_rows is None:
            return True
        if self.every_seconds is not None and now - self._last_upload_at >= self.every_seconds:
            return True
        return self.every_rows is not None and self._rows_now(size) - self.uploaded_rows >= self.every_rows

    def _maybe_upload(self, force: bool) -> bool:
        now = self._clock()
        if not force and self._retry_at is not None and now < self._retry_at:
            return False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        stat = (st.st_size, st.st_mtime_ns)
        if stat == self._seen_stat:
            return False
        if not force and not self._due(now, st.st_size):
            return False
        with tempfile.TemporaryDirectory(prefix="runjob-upload-") as tmp:
            snap = Path(tmp) / Path(self.path_in_repo).name
            sha, rows, size = self._snapshot(snap, st.st_size, whole=force)
            if size == 0:
                return False
            if sha == self._last_sha:
                self._seen_stat = stat  # touched or rewritten with the same content
                return False
            oid = self._upload_with_retries(snap, rows)
        if oid is None:
            return False
        self._seen_stat = stat if size == st.st_size else None
        self._last_sha = sha
        self._last_upload_at = self._clock()
        self._retry_at = None
        self.uploaded_rows = rows
        self.uploads += 1
        self.last_commit = oid
        self.last_error = None
        return True

    def _snapshot(self, dest: Path, size: int, *, whole: bool) -> tuple[str, int, int]:
        """Copy the first ``size`` bytes to ``dest``, cut after the last newline unless ``whole``.

        Returns (sha256, complete rows, bytes copied)."""
        import hashlib

        end = size if whole else after_last_newline(self.path, size)
        h = hashlib.sha256()
        rows = 0
        last = b""
        with open(self.path, "rb") as src, open(dest, "wb") as out:
            left = end
            while left > 0:
                block = src.read(min(left, 1 << 20))
                if not block:
                    break
                left -= len(block)
                h.update(block)
                rows += block.count(b"\n")
                out.write(block)
                last = block[-1:]
            copied = end - left
        if copied and last != b"\n":
            rows += 1  # a final line without a newline (only with whole=True)
        return h.hexdigest(), rows, copied

    def _upload_with_retries(self, snap: Path, rows: int) -> str | None:
        try:
            import huggingface_hub  # noqa: F401
        except ImportError:
            self._failed("huggingface_hub is not installed in the job's environment: pip install huggingface_hub")
            return None
        token = resolve_token(self._token)
        if not token:
            self._failed(f"no Hugging Face token for {self.endpoint}: set HF_TOKEN")
            return None
        self._token = token
        delay = self.backoff_seconds
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._upload(snap, rows, token)
            except Exception as e:  # noqa: BLE001
                try:
                    msg, retryable = describe_hub_error(e, endpoint=self.endpoint, repo_id=self.repo_id, token=token,
                                                        revision=self.revision, filename=self.path_in_repo)
                except Exception:  # noqa: BLE001 - huggingface_hub missing or an odd exception
                    msg, retryable = scrub(f"{type(e).__name__}: {e}", token), True
                self.last_error = msg
                if not retryable or attempt == self.max_attempts:
                    self._failed(msg)
                    return None
                self._sleep(min(delay, 30.0))
                delay *= 2
        return None  # pragma: no cover

    def _upload(self, snap: Path, rows: int, token: str) -> str:
        import huggingface_hub as hf

        api = hf.HfApi(endpoint=self.endpoint, token=token, library_name="runjob")
        if not self._repo_ready:
            api.create_repo(self.repo_id, repo_type="dataset", private=self.private, exist_ok=True, token=token)
            if self.revision:
                api.create_branch(self.repo_id, repo_type="dataset", branch=self.revision, exist_ok=True,
                                  token=token)
            self._repo_ready = True
        info = api.create_commit(
            self.repo_id, repo_type="dataset", revision=self.revision, token=token,
            operations=[hf.CommitOperationAdd(path_in_repo=self.path_in_repo, path_or_fileobj=str(snap))],
            commit_message=f"runjob: partial results ({rows} rows)",
        )
        return info.oid


def after_last_newline(path: Path, size: int) -> int:
    """Offset just after the last newline within the first ``size`` bytes (0 if there is none)."""
    with open(path, "rb") as fh:
        pos = size
        while pos > 0:
            step = min(pos, 1 << 16)
            fh.seek(pos - step)
            block = fh.read(step)
            i = block.rfind(b"\n")
            if i >= 0:
                return pos - step + i + 1
            pos -= step
    return 0
