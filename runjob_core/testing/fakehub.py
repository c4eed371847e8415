"""A fake Hugging Face Hub API server for offline tests (stdlib only).

It speaks enough of the Hub's HTTP API for the real ``huggingface_hub`` client (checked with
2.4.0) to create dataset/model repos and branches, commit files (inline or through the legacy
Git LFS path: batch -> PUT -> verify), list trees, refs and commits, read repo info, and download
files (HEAD + GET with ``Range``)::

    hub = serve(tmp_path / "hub", token="hf_test")
    api = HfApi(endpoint=hub.url, token="hf_test")
    ...
    hub.stop()

The client uploads files the server marks ``lfs`` through Xet unless Xet is disabled
(``HF_HUB_DISABLE_XET=1`` or ``huggingface_hub.constants.HF_HUB_DISABLE_XET = True``). Xet is not
faked; set ``hub.force_regular = True`` to have every file sent inline in the commit instead.

Content lives on disk under ``root_dir`` (regular files by git blob sha1 in ``blobs/``, LFS
objects by sha256 in ``lfs/``), so large files are streamed, not held in memory. Repo metadata
(branches, commits, file tables) is kept in memory.

Auth: every request needs ``Authorization: Bearer <token>`` (the write token, or one of
``read_tokens`` for read-only access). A wrong token gets ``401`` with the Hub's
``Invalid credentials in Authorization header``; a missing one gets ``401`` with
``X-Error-Code: RepoNotFound`` on repo URLs (what the Hub sends for anonymous access to a private
repo); a read token used for a write gets ``403``. LFS upload URLs are pre-signed (like S3 URLs)
because the client sends no token with the PUT.

Test switches (attributes, changeable while the server runs):

* ``force_regular``: every file gets ``uploadMode: regular`` (for the Xet-on path).
* ``drop_row_on_download``: ``.jsonl`` files are served without their last line.
* ``fail_next(prefix, count=1, status=500)``: the next ``count`` requests whose path starts with
  ``prefix`` get ``status``.
* ``requests``: the request log, a list of :class:`LoggedRequest` (method, path, status, query).

Run standalone with ``python -m runjob_core.fakehub ROOT [PORT] [TOKEN]``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = ["FakeHub", "FileEntry", "LoggedRequest", "serve"]

DEFAULT_TOKEN = "hf_fakehub_write_token"
LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub sends files of 10 MB and more to LFS
LFS_EXTENSIONS = (
    ".7z", ".arrow", ".bin", ".bz2", ".ckpt", ".gz", ".h5", ".joblib", ".msgpack", ".npy", ".npz", ".onnx",
    ".parquet", ".pb", ".pickle", ".pkl", ".pt", ".pth", ".rar", ".safetensors", ".tar", ".tgz", ".xz", ".zip",
    ".zst", ".png", ".jpg", ".jpeg", ".wav", ".mp3", ".flac", ".mp4",
)
GITATTRIBUTES = "".join(f"*{ext} filter=lfs diff=lfs merge=lfs -text\n" for ext in LFS_EXTENSIONS).encode()
REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
TREE_PAGE_SIZE = 1000
CHUNK = 1 << 20
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(oid: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n".encode()


class LoggedRequest(NamedTuple):
    method: str
    path: str  # URL path, percent-decoded, without the query
    status: int
    query: str = ""


@dataclass(frozen=True)
class FileEntry:
    """A file in a commit. ``oid`` is the git blob sha1 (of the LFS pointer for LFS files)."""

    path: str
    oid: str
    size: int
    blob: str  # location under root_dir
    lfs_oid: str | None = None  # sha256 for LFS files
    pointer_size: int | None = None

    @property
    def etag(self) -> str:
        return self.lfs_oid or self.oid


@dataclass
class Commit:
    id: str
    parents: list[str]
    title: str
    message: str
    date: str
    files: dict[str, FileEntry]


@dataclass
class Repo:
    type: str
    id: str
    private: bool
    created: str
    branches: dict[str, str] = field(default_factory=dict)  # name -> commit id
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, rev: str | None) -> str | None:
        rev = rev or "main"
        if rev.startswith("refs/heads/"):
            rev = rev[len("refs/heads/"):]
        if rev in self.branches:
            return self.branches[rev]
        return rev if rev in self.commits else None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


class _Failure:
    def __init__(self, prefix: str, count: int, status: int, method: str | None) -> None:
        self.prefix, self.count, self.status, self.method = prefix, count, status, method


class FakeHub(ThreadingHTTPServer):
    """The server. Create it with :func:`serve`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root_dir: Path, host: str, port: int, token: str, read_tokens: tuple[str, ...]) -> None:
        self.root = Path(root_dir)
        for sub in ("blobs", "lfs", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.token = token
        self.read_tokens = tuple(read_tokens)
        self.user = "runjob-tester"
        self.force_regular = False
        self.drop_row_on_download = False
        self.lfs_threshold = LFS_THRESHOLD
        self.tree_page_size = TREE_PAGE_SIZE
        self.requests: list[LoggedRequest] = []
        self.errors: list[str] = []  # tracebacks of handler crashes (a bug in the fake or a bad request)
        self.lock = threading.RLock()
        self.repos: dict[tuple[str, str], Repo] = {}
        self._failures: list[_Failure] = []
        self._secret = secrets.token_bytes(16)
        self._thread: threading.Thread | None = None
        super().__init__((host, port), _Handler)

    # -- control

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, prefix: str, count: int = 1, status: int = 500, method: str | None = None) -> None:
        """Make the next ``count`` requests whose path starts with ``prefix`` fail with ``status``."""
        with self.lock:
            self._failures.append(_Failure(prefix, count, status, method.upper() if method else None))

    def clear_failures(self) -> None:
        with self.lock:
            self._failures.clear()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- inspection (for tests)

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo | None:
        return self.repos.get((repo_type, repo_id))

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, FileEntry]:
        """The files at ``revision`` (``{}`` if the repo or revision does not exist)."""
        with self.lock:
            repo = self.repo(repo_id, repo_type)
            sha = repo.resolve(revision) if repo else None
            return dict(repo.commits[sha].files) if sha else {}

    def commits(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> list[Commit]:
        """Commits reachable from ``revision``, newest first."""
        with self.lock:
            repo = self.repo(repo_id, repo_type)
            sha = repo.resolve(revision) if repo else None
            out = []
            while sha:
                c = repo.commits[sha]
                out.append(c)
                sha = c.parents[0] if c.parents else None
            return out

    def blob_path(self, entry: FileEntry) -> Path:
        return self.root / entry.blob

    def read(self, repo_id: str, path: str, revision: str = "main", repo_type: str = "dataset") -> bytes:
        entry = self.files(repo_id, revision, repo_type)[path]
        return self.blob_path(entry).read_bytes()

    def count(self, method: str | None = None, prefix: str = "") -> int:
        """How many logged requests match ``method`` (any if None) and the path ``prefix``."""
        with self.lock:
            return sum(1 for r in self.requests if (method is None or r.method == method) and r.path.startswith(prefix))

    # -- storage helpers (called by the handler, under the lock where state changes)

    def _take_failure(self, method: str, path: str) -> int | None:
        with self.lock:
            for f in self._failures:
                if f.count > 0 and path.startswith(f.prefix) and (f.method is None or f.method == method):
                    f.count -= 1
                    status = f.status
                    self._failures = [x for x in self._failures if x.count > 0]
                    return status
        return None

    def _sign(self, oid: str) -> str:
        return hmac.new(self._secret, oid.encode(), hashlib.sha256).hexdigest()[:32]

    def _lfs_file(self, oid: str) -> Path:
        return self.root / "lfs" / oid[:2] / oid

    def _store_blob(self, data: bytes) -> FileEntry:
        oid = git_blob_sha1(data)
        dest = self.root / "blobs" / oid
        if not dest.exists():
            tmp = self._tmp()
            tmp.write_bytes(data)
            os.replace(tmp, dest)
        return FileEntry(path="", oid=oid, size=len(data), blob=f"blobs/{oid}")

    def _tmp(self) -> Path:
        fd, name = tempfile.mkstemp(dir=self.root / "tmp")
        os.close(fd)
        return Path(name)

    def _new_commit(self, repo: Repo, branch: str, title: str, message: str, files: dict[str, FileEntry]) -> str:
        parent = repo.branches.get(branch)
        seed = f"{repo.type}/{repo.id}/{branch}/{parent}/{title}/{time.time_ns()}/{len(repo.commits)}"
        sha = hashlib.sha1(seed.encode()).hexdigest()
        repo.commits[sha] = Commit(sha, [parent] if parent else [], title, message, _now(), files)
        repo.branches[branch] = sha
        return sha


def serve(root_dir: Path | str, port: int = 0, token: str = DEFAULT_TOKEN, *, host: str = "127.0.0.1",
          read_tokens: tuple[str, ...] | list[str] = ()) -> FakeHub:
    """Start a fake Hub on ``host:port`` (0 = any free port) in a daemon thread and return it."""
    srv = FakeHub(Path(root_dir), host, port, token, tuple(read_tokens))
    srv._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                   name=f"fakehub:{srv.server_address[1]}", daemon=True)
    srv._thread.start()
    return srv


class _Reply(Exception):
    """Raised inside a handler to send an error response."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


_REPO = r"(models|datasets|spaces)/([^/]+/[^/]+)"
_ROUTES: list[tuple[str, re.Pattern, str]] = [
    (m, re.compile(rx), name)
    for m, rx, name in [
        ("POST", r"/api/repos/create", "create_repo"),
        ("POST", r"/api/validate-yaml", "validate_yaml"),
        ("GET", r"/api/whoami-v2", "whoami"),
        ("GET", rf"/api/{_REPO}", "repo_info"),
        ("GET", rf"/api/{_REPO}/revision/([^/]+)", "repo_info"),
        ("POST", rf"/api/{_REPO}/preupload/([^/]+)", "preupload"),
        ("POST", rf"/api/{_REPO}/commit/([^/]+)", "commit"),
        ("GET", rf"/api/{_REPO}/tree/([^/]+)(?:/(.*))?", "tree"),
        ("POST", rf"/api/{_REPO}/paths-info/([^/]+)", "paths_info"),
        ("GET", rf"/api/{_REPO}/commits/([^/]+)", "list_commits"),
        ("GET", rf"/api/{_REPO}/refs", "refs"),
        ("POST", rf"/api/{_REPO}/branch/([^/]+)", "create_branch"),
        ("DELETE", rf"/api/{_REPO}/branch/([^/]+)", "delete_branch"),
        ("GET", rf"/api/{_REPO}/xet-write-token/([^/]+)", "xet_token"),
        ("GET", rf"/api/{_REPO}/xet-read-token/([^/]+)", "xet_token"),
        ("POST", r"/(?:(datasets|spaces)/)?([^/]+/[^/]+?)(?:\.git)?/info/lfs/objects/batch", "lfs_batch"),
        ("PUT", r"/_lfs/([0-9a-f]{64})", "lfs_put"),
        ("POST", r"/_lfs/([0-9a-f]{64})/verify", "lfs_verify"),
        ("GET", r"/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", "resolve"),
        ("HEAD", r"/(?:(datasets|spaces)/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", "resolve"),
    ]
]
_WRITE_ROUTES = {"create_repo", "preupload", "commit", "create_branch", "delete_branch", "lfs_batch", "lfs_verify"}
_NO_TOKEN_ROUTES = {"lfs_put"}  # pre-signed URL instead


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakehub/1.0"
    timeout = 120
    server: FakeHub

    # -- plumbing

    def log_message(self, fmt: str, *args: Any) -> None:  # the request log replaces stderr logging
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        self._status = 0
        self._logged = False
        self._cached_body = None  # a body read early (by the auth check); one per request
        self._body_read = False
        split = urlsplit(self.path)
        raw_path, self.query = split.path, parse_qs(split.query)
        path = unquote(raw_path)
        self._log_entry = (method, path, split.query)
        try:
            try:
                self._dispatch(method, raw_path, path)
            except _Reply as r:
                self._error(r.status, r.message, r.code, r.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # noqa: BLE001 - a crash in the fake must not kill the server
            self.server.errors.append(traceback.format_exc())
            try:
                self._error(500, "fakehub internal error (see FakeHub.errors)")
            except OSError:
                self.close_connection = True
        finally:
            self._log()

    def _log(self) -> None:
        """Log the request once, as soon as its status is known (before the client sees the reply)."""
        if getattr(self, "_log_entry", None) and not self._logged:
            self._logged = True
            method, path, query = self._log_entry
            with self.server.lock:
                self.server.requests.append(LoggedRequest(method, path, self._status, query))

    def _dispatch(self, method: str, raw_path: str, path: str) -> None:
        status = self.server._take_failure(method, path)
        if status is not None:
            raise _Reply(status, f"fakehub: injected failure ({status})")
        for m, rx, name in _ROUTES:
            match = rx.fullmatch(raw_path)
            if match and m == method:
                groups = [unquote(g) if g is not None else None for g in match.groups()]
                if name not in _NO_TOKEN_ROUTES:
                    self._check_auth(name, raw_path)
                getattr(self, f"r_{name}")(*groups)
                return
        if any(rx.fullmatch(raw_path) for _, rx, _ in _ROUTES):
            raise _Reply(405, f"method {method} not allowed on {path}")
        raise _Reply(404, f"fakehub: no route for {method} {path}")

    def _check_auth(self, route: str, raw_path: str) -> None:
        header = self.headers.get("Authorization") or ""
        token = header[len("Bearer "):] if header.startswith("Bearer ") else None
        if not header:
            if raw_path.startswith(("/api/models/", "/api/datasets/", "/api/spaces/")) or "/resolve/" in raw_path:
                raise _Reply(401, "Repository not found", "RepoNotFound")
            raise _Reply(401, "Invalid username or password.")
        if token is not None and hmac.compare_digest(token, self.server.token):
            self.role = "write"
            return
        if token is not None and any(hmac.compare_digest(token, t) for t in self.server.read_tokens):
            self.role = "read"
            if route in _WRITE_ROUTES and not (route == "lfs_batch" and self._peek_lfs_operation() == "download"):
                raise _Reply(403, "You don't have the rights to write to this repository: the token is read-only")
            return
        raise _Reply(401, INVALID_CREDENTIALS)

    def _peek_lfs_operation(self) -> str:
        self._cached_body = self._body()
        try:
            return json.loads(self._cached_body or b"{}").get("operation", "")
        except ValueError:
            return ""

    @property
    def base(self) -> str:
        return f"http://{self.headers.get('Host') or self.server.url.split('://', 1)[1]}"

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        self._log()
        super().send_response(code, message)

    def _body_length(self) -> int | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return None
        return int(self.headers.get("Content-Length") or 0)

    def _iter_body(self):
        """Yield the request body in chunks (Content-Length or chunked transfer encoding)."""
        if getattr(self, "_cached_body", None) is not None:
            body, self._cached_body = self._cached_body, None
            yield body
            return
        self._body_read = True
        n = self._body_length()
        if n is not None:
            while n > 0:
                chunk = self.rfile.read(min(n, CHUNK))
                if not chunk:
                    raise ConnectionResetError("client closed during the body")
                n -= len(chunk)
                yield chunk
            return
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return
            left = size
            while left > 0:
                chunk = self.rfile.read(min(left, CHUNK))
                if not chunk:
                    raise ConnectionResetError("client closed during the body")
                left -= len(chunk)
                yield chunk
            self.rfile.readline()

    def _body(self) -> bytes:
        return b"".join(self._iter_body())

    def _json_body(self) -> Any:
        try:
            return json.loads(self._body() or b"{}")
        except ValueError:
            raise _Reply(400, "request body is not JSON") from None

    def _finish_body(self) -> None:
        """Before replying: drain a small unread body, or close the connection after a big one."""
        if self._body_read or getattr(self, "_cached_body", None) is not None:
            return
        n = self._body_length()
        if n is None or n > 16 * CHUNK:
            self.close_connection = True
        elif n:
            self.rfile.read(n)
        self._body_read = True

    def _send(self, status: int, payload: Any = None, headers: dict | None = None, raw: bytes | None = None) -> None:
        self._finish_body()
        data = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
        self.send_response(status)
        if raw is None and payload is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None, headers: dict | None = None) -> None:
        h = {"X-Error-Message": message}
        if code:
            h["X-Error-Code"] = code
        h.update(headers or {})
        self._send(status, {"error": message}, h)

    def _repo(self, type_plural_or_single: str | None, repo_id: str, *, plural: bool = True) -> Repo:
        rtype = REPO_TYPES[type_plural_or_single] if plural else {"datasets": "dataset", "spaces": "space"}.get(
            type_plural_or_single or "", "model")
        repo = self.server.repos.get((rtype, repo_id))
        if repo is None:
            raise _Reply(404, "Repository not found", "RepoNotFound")
        return repo

    def _rev(self, repo: Repo, rev: str | None, *, headers: dict | None = None) -> str:
        sha = repo.resolve(rev)
        if sha is None:
            raise _Reply(404, f"Invalid rev id: {rev}", "RevisionNotFound", headers)
        return sha

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.base}/{URL_PREFIX[repo.type]}{repo.id}"

    # -- endpoints

    def r_create_repo(self) -> None:
        p = self._json_body()
        rtype = p.get("type") or "model"
        if rtype not in URL_PREFIX or not p.get("name"):
            raise _Reply(400, "invalid repo type or name")
        rid = f"{p.get('organization') or self.server.user}/{p['name']}"
        url = f"{self.base}/{URL_PREFIX[rtype]}{rid}"
        with self.server.lock:
            if (rtype, rid) in self.server.repos:  # the client reads "url" from the 409 body with exist_ok
                return self._send(409, {"error": "You already created this repo", "url": url},
                                  {"X-Error-Message": "You already created this repo"})
            private = p.get("visibility") == "private" or bool(p.get("private"))
            repo = Repo(rtype, rid, private, _now())
            entry = replace(self.server._store_blob(GITATTRIBUTES), path=".gitattributes")
            self.server._new_commit(repo, "main", "initial commit", "", {".gitattributes": entry})
            self.server.repos[(rtype, rid)] = repo
        self._send(200, {"url": url, "name": rid, "id": rid})

    def r_validate_yaml(self) -> None:
        p = self._json_body()
        content = p.get("content") or ""
        errors = []
        if content.startswith("---") and "\n---" not in content[3:]:
            errors.append({"message": "YAML front matter is not closed by a --- line"})
        if errors:
            raise _Reply(400, "Invalid metadata in README.md: " + "; ".join(e["message"] for e in errors))
        self._send(200, {"errors": [], "warnings": []})

    def r_whoami(self) -> None:
        self._finish_body()
        self._send(200, {"type": "user", "name": self.server.user, "fullname": "runjob tester", "orgs": [],
                         "auth": {"type": "access_token",
                                  "accessToken": {"displayName": "fakehub", "role": self.role}}})

    def r_repo_info(self, tplural: str, rid: str, rev: str | None = None) -> None:
        with self.server.lock:
            repo = self._repo(tplural, rid)
            sha = self._rev(repo, rev)
            files = repo.commits[sha].files
        blobs = self.query.get("blobs", ["false"])[0].lower() in ("1", "true")
        siblings = []
        for p, e in sorted(files.items()):
            s: dict[str, Any] = {"rfilename": p}
            if blobs:
                s.update(size=e.size, blobId=e.oid)
                if e.lfs_oid:
                    s["lfs"] = {"sha256": e.lfs_oid, "size": e.size, "pointerSize": e.pointer_size}
            siblings.append(s)
        self._send(200, {"_id": hashlib.md5(rid.encode()).hexdigest()[:24], "id": rid, "sha": sha,
                         "private": repo.private, "disabled": False, "gated": False, "downloads": 0, "likes": 0,
                         "tags": [], "author": rid.split("/")[0], "siblings": siblings,
                         "createdAt": repo.created, "lastModified": repo.commits[sha].date})

    def r_preupload(self, tplural: str, rid: str, rev: str) -> None:
        p = self._json_body()
        if self.query.get("create_pr"):
            raise _Reply(400, "fakehub: pull requests are not supported")
        with self.server.lock:
            repo = self._repo(tplural, rid)
            sha = self._rev(repo, rev)
            files = repo.commits[sha].files
        out = []
        for f in p.get("files", []):
            try:
                sample = base64.b64decode(f.get("sample") or "")
            except ValueError:
                sample = b""
            path = f["path"]
            lfs = not self.server.force_regular and (
                f.get("size", 0) >= self.server.lfs_threshold or path.lower().endswith(LFS_EXTENSIONS)
                or b"\0" in sample)
            cur = files.get(path)
            out.append({"path": path, "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                        "oid": (cur.lfs_oid or cur.oid) if cur else None})
        self._send(200, {"files": out, "commitOid": sha})

    def r_commit(self, tplural: str, rid: str, rev: str) -> None:
        if self.query.get("create_pr"):
            raise _Reply(400, "fakehub: pull requests are not supported")
        lines = []
        for raw in self._body().splitlines():
            if raw.strip():
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    raise _Reply(400, "commit payload is not NDJSON") from None
        header = next((ln["value"] for ln in lines if ln.get("key") == "header"), None)
        if header is None or not header.get("summary"):
            raise _Reply(400, "commit header with a summary is required")
        with self.server.lock:
            repo = self._repo(tplural, rid)
            if rev not in repo.branches:
                if rev in repo.commits:
                    raise _Reply(400, "fakehub: commits must target a branch, not a commit id")
                raise _Reply(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            head = repo.branches[rev]
            parent = header.get("parentCommit")
            if parent and parent != head:
                raise _Reply(412, "A commit has happened since. Please refresh and try again.")
            files = dict(repo.commits[head].files)
            for ln in lines:
                key, v = ln.get("key"), ln.get("value") or {}
                if key == "header":
                    continue
                if key == "file":
                    if v.get("encoding", "base64") != "base64":
                        raise _Reply(400, "only base64 file content is supported")
                    data = base64.b64decode(v.get("content") or "")
                    files[v["path"]] = replace(self.server._store_blob(data), path=v["path"])
                elif key == "lfsFile":
                    oid, lfs_path = v.get("oid", ""), self.server._lfs_file(v.get("oid", "x" * 64))
                    if not lfs_path.is_file():
                        raise _Reply(400, f"LFS object {oid} was not uploaded")
                    size = lfs_path.stat().st_size
                    if v.get("size") is not None and int(v["size"]) != size:
                        raise _Reply(400, f"LFS object {oid} has size {size}, not {v['size']}")
                    ptr = lfs_pointer(oid, size)
                    files[v["path"]] = FileEntry(v["path"], git_blob_sha1(ptr), size,
                                                 str(lfs_path.relative_to(self.server.root)), oid, len(ptr))
                elif key == "deletedFile":
                    if files.pop(v.get("path"), None) is None:
                        raise _Reply(404, f"File not found: {v.get('path')}", "EntryNotFound")
                elif key == "deletedFolder":
                    prefix = v.get("path", "").rstrip("/") + "/"
                    for pth in [x for x in files if x.startswith(prefix)]:
                        del files[pth]
                else:
                    raise _Reply(400, f"fakehub: unsupported commit operation {key!r}")
            sha = self.server._new_commit(repo, rev, header["summary"], header.get("description") or "", files)
        self._send(200, {"commitUrl": f"{self._repo_url(repo)}/commit/{sha}", "commitOid": sha,
                         "success": True, "pullRequestUrl": None})

    def _file_json(self, e: FileEntry) -> dict:
        d: dict[str, Any] = {"type": "file", "oid": e.oid, "size": e.size, "path": e.path}
        if e.lfs_oid:
            d["lfs"] = {"oid": e.lfs_oid, "size": e.size, "pointerSize": e.pointer_size}
        return d

    def _entries(self, files: dict[str, FileEntry], sub: str, recursive: bool) -> list[dict]:
        sub = sub.strip("/")
        entries: list[dict] = []
        dirs: set[str] = set()
        for pth, e in sorted(files.items()):
            if sub and not pth.startswith(sub + "/"):
                continue
            parts = (pth[len(sub) + 1:] if sub else pth).split("/")
            for i in range(1, len(parts)):
                d = "/".join(([sub] if sub else []) + parts[:i])
                if (recursive or i == 1) and d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                                    "path": d})
            if recursive or len(parts) == 1:
                entries.append(self._file_json(e))
        return entries

    def r_tree(self, tplural: str, rid: str, rev: str, sub: str | None) -> None:
        with self.server.lock:
            repo = self._repo(tplural, rid)
            sha = self._rev(repo, rev)
            files = repo.commits[sha].files
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        sub = (sub or "").strip("/")
        if sub and sub in files:
            raise _Reply(400, f"{sub} is a file, not a directory")
        entries = self._entries(files, sub, recursive)
        if sub and not entries:
            raise _Reply(404, f"Entry not found: {sub}", "EntryNotFound")
        start = int(self.query.get("cursor", ["0"])[0] or 0)
        page = entries[start:start + self.server.tree_page_size]
        headers = {}
        if start + self.server.tree_page_size < len(entries):
            q = f"recursive={str(recursive).lower()}&cursor={start + self.server.tree_page_size}"
            path = f"/api/{tplural}/{rid}/tree/{quote(rev, safe='')}" + (f"/{quote(sub)}" if sub else "")
            headers["Link"] = f'<{self.base}{path}?{q}>; rel="next"'
        self._send(200, page, headers)

    def r_paths_info(self, tplural: str, rid: str, rev: str) -> None:
        body = self._body().decode()
        ctype = self.headers.get("Content-Type") or ""
        paths = json.loads(body).get("paths", []) if "json" in ctype else parse_qs(body).get("paths", [])
        with self.server.lock:
            repo = self._repo(tplural, rid)
            files = repo.commits[self._rev(repo, rev)].files
        out = []
        for p in paths:
            p = p.strip("/")
            if p in files:
                out.append(self._file_json(files[p]))
            elif any(f.startswith(p + "/") for f in files):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        self._send(200, out)

    def r_list_commits(self, tplural: str, rid: str, rev: str) -> None:
        with self.server.lock:
            repo = self._repo(tplural, rid)
            sha: str | None = self._rev(repo, rev)
            out = []
            while sha:
                c = repo.commits[sha]
                out.append({"id": c.id, "title": c.title, "message": c.message, "date": c.date,
                            "authors": [{"user": self.server.user}]})
                sha = c.parents[0] if c.parents else None
        self._send(200, out)

    def r_refs(self, tplural: str, rid: str) -> None:
        with self.server.lock:
            repo = self._repo(tplural, rid)
            branches = [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": s} for b, s in repo.branches.items()]
        self._send(200, {"branches": branches, "converts": [], "tags": [], "pullRequests": []})

    def r_create_branch(self, tplural: str, rid: str, branch: str) -> None:
        p = self._json_body()
        with self.server.lock:
            repo = self._repo(tplural, rid)
            if branch in repo.branches:
                raise _Reply(409, "Reference already exists")
            start = self._rev(repo, p.get("startingPoint") or "main")
            repo.branches[branch] = start
        self._send(200, {})

    def r_delete_branch(self, tplural: str, rid: str, branch: str) -> None:
        with self.server.lock:
            repo = self._repo(tplural, rid)
            if branch not in repo.branches or branch == "main":
                raise _Reply(404 if branch != "main" else 403, f"cannot delete branch {branch}")
            del repo.branches[branch]
        self._send(200, {})

    def r_xet_token(self, tplural: str, rid: str, rev: str) -> None:
        raise _Reply(501, "fakehub does not implement Xet: disable Xet (HF_HUB_DISABLE_XET=1) or set "
                          "force_regular on the fake Hub")

    def r_lfs_batch(self, tsingle: str | None, rid: str) -> None:
        p = self._json_body()
        with self.server.lock:
            self._repo(tsingle, rid, plural=False)
        objects = []
        for o in p.get("objects", []):
            oid, size = o.get("oid", ""), int(o.get("size", 0))
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            have = re.fullmatch(r"[0-9a-f]{64}", oid) and self.server._lfs_file(oid).is_file()
            if p.get("operation") == "download":
                if have:
                    entry["actions"] = {"download": {"href": f"{self.base}/_lfs/{oid}?sig={self.server._sign(oid)}"}}
                else:
                    entry["error"] = {"code": 404, "message": "Object does not exist"}
            elif not have:  # no "actions" means "already there": the client skips the upload
                entry["actions"] = {
                    "upload": {"href": f"{self.base}/_lfs/{oid}?sig={self.server._sign(oid)}", "header": {}},
                    "verify": {"href": f"{self.base}/_lfs/{oid}/verify", "header": {}},
                }
            objects.append(entry)
        self._send(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                   {"Content-Type": "application/vnd.git-lfs+json"})

    def r_lfs_put(self, oid: str) -> None:
        sig = self.query.get("sig", [""])[0]
        if not hmac.compare_digest(sig, self.server._sign(oid)):
            raise _Reply(403, "fakehub: bad or missing signature on the LFS upload URL")
        tmp = self.server._tmp()
        h = hashlib.sha256()
        try:
            with open(tmp, "wb") as out:
                for chunk in self._iter_body():
                    h.update(chunk)
                    out.write(chunk)
            if h.hexdigest() != oid:
                raise _Reply(400, f"sha256 of the upload is {h.hexdigest()}, not {oid}")
            dest = self.server._lfs_file(oid)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        self._send(200, {}, {"ETag": f'"{oid}"'})

    def r_lfs_verify(self, oid: str) -> None:
        p = self._json_body()
        f = self.server._lfs_file(oid)
        if not f.is_file() or (p.get("size") is not None and int(p["size"]) != f.stat().st_size):
            raise _Reply(404, f"LFS object {oid} not found or wrong size")
        self._send(200, {"ok": True})

    def r_resolve(self, tsingle: str | None, rid: str, rev: str, fpath: str) -> None:
        with self.server.lock:
            repo = self._repo(tsingle, rid, plural=False)
            sha = self._rev(repo, rev)
            entry = repo.commits[sha].files.get(fpath)
        headers = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        if entry is None:
            raise _Reply(404, "Entry not found", "EntryNotFound", headers)
        blob = self.server.blob_path(entry)
        size = entry.size
        if self.server.drop_row_on_download and fpath.endswith(".jsonl"):
            size = _without_last_line(blob, size)
        headers.update({"ETag": f'"{entry.etag}"', "Content-Type": "application/octet-stream"})
        if entry.lfs_oid:
            headers["X-Linked-Size"] = size
            headers["X-Linked-ETag"] = f'"{entry.lfs_oid}"'
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and self.command == "GET":
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or (not m[1] and not m[2]):
                raise _Reply(416, f"bad range {rng}", headers={"Content-Range": f"bytes */{size}"})
            if m[1]:
                start, end = int(m[1]), min(int(m[2]), size - 1) if m[2] else size - 1
            else:  # suffix range: last N bytes
                start, end = max(0, size - int(m[2])), size - 1
            if start >= size and size > 0 or start > end + 1:
                raise _Reply(416, f"range {rng} outside 0..{size}", headers={"Content-Range": f"bytes */{size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = max(0, end - start + 1)
        self._finish_body()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(blob, "rb") as fh:
            fh.seek(start)
            left = length
            while left > 0:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def _without_last_line(path: Path, size: int) -> int:
    """Length of the file without its last line (the drop_row_on_download switch)."""
    from runjob_core.job.hub import after_last_newline

    with open(path, "rb") as fh:
        fh.seek(max(0, size - 1))
        ends_with_newline = size and fh.read(1) == b"\n"
    # Ignore a final newline: the last line is the one before it.
    return after_last_newline(path, size - 1 if ends_with_newline else size)


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - manual use
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m runjob_core.fakehub ROOT_DIR [PORT] [TOKEN]", file=sys.stderr)
        raise SystemExit(2)
    hub = serve(argv[0], int(argv[1]) if len(argv) > 1 else 0, argv[2] if len(argv) > 2 else DEFAULT_TOKEN)
    print(hub.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
