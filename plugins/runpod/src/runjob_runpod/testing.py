"""A fake RunPod REST API v2 for tests, whose running pods are real sshd servers.

It follows RunPod's OpenAPI file (``api-reference-v2/openapi.json`` in ``runpod/docs``)
field by field for what runjob uses: ``POST/GET /v2/pods``, ``GET/DELETE /v2/pods/{id}``,
``POST /v2/pods/{id}/action``, ``GET /v2/catalog/gpus``; ``Pod`` bodies carry every field
the spec requires; errors are ``application/problem+json`` ``{title, status, detail,
errors?}``; every answer carries ``RateLimit``/``RateLimit-Policy`` and a 429 carries
``Retry-After``.

Pods move PROVISIONING -> STARTING -> RUNNING one step per read of the pod (list or get),
so a client sees every status; on RUNNING a real sshd (:mod:`runjob_runpod._fakepod`)
serves ``ssh.direct`` and ``runtime.ports``. ``stop`` kills it (EXITED, ``cost`` 0, no
``runtime``), ``start`` brings it back on a new port, ``terminate``/``DELETE`` removes the
pod (then 404). Tests steer it with :meth:`FakeRunpod.fail` (queued errors), ``capacity``,
``balance``, :meth:`FakeRunpod.lose` (a pod dies under its job) and
:meth:`FakeRunpod.rekey`.

Fixture ``fake_runpod`` (``pytest_plugins = ["runjob_runpod.testing"]``) starts one per
test and, at teardown, kills every pod's sshd and fails the test if a pod was left
PROVISIONING, STARTING or RUNNING: runjob must never leave a paid pod behind.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs

from runjob_runpod import _fakepod

API_KEY = "rp_fake_key_0123456789"
#: The default catalog (ids, VRAM and list prices per GPU-hour as RunPod lists them).
CATALOG = (
    {"id": "NVIDIA H100 80GB HBM3", "name": "H100 SXM", "pool": "HOPPER_141", "manufacturer": "Nvidia", "memory": 80,
     "secure": True, "community": True, "price": {"secure": 2.69, "community": 1.99}, "maxCount": {"secure": 8, "community": 8}},
    {"id": "NVIDIA A100 80GB PCIe", "name": "A100 PCIe", "pool": "AMPERE_80", "manufacturer": "Nvidia", "memory": 80,
     "secure": True, "community": True, "price": {"secure": 1.64, "community": 1.19}, "maxCount": {"secure": 8, "community": 8}},
    {"id": "NVIDIA GeForce RTX 4090", "name": "RTX 4090", "pool": "ADA_24", "manufacturer": "Nvidia", "memory": 24,
     "secure": True, "community": True, "price": {"secure": 0.69, "community": 0.34}, "maxCount": {"secure": 8, "community": 8}},
)
NO_CAPACITY = "There are no longer any instances available with the requested specifications. Please refresh and try again."
LIVE = ("PROVISIONING", "STARTING", "RUNNING")
ACTIONS = {"PROVISIONING": ["stop", "terminate"], "STARTING": ["stop", "terminate"], "RUNNING": ["stop", "restart", "terminate"],
           "EXITED": ["start", "terminate"], "ERROR": ["start", "terminate"], "TERMINATED": []}
_CREATE_KEYS = {"name", "image", "args", "disk", "env", "ports", "registry", "cloud", "cpu", "dataCenterIds",
                "globalNetworking", "gpu", "mounts", "startJupyter", "startSsh", "templateId"}
_TITLES = {400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
           409: "Conflict", 422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable"}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@attrs.define
class Fault:
    """A queued error answer: the next *times* requests matching *method*/*path* get it."""

    status: int
    method: str | None = None
    path: str | None = None  # a regular expression on the path, e.g. r"^/v2/pods$"
    times: int = 1
    retry_after: int | None = None
    detail: str | None = None
    #: Carry the request out, then answer the error anyway (a 5xx after a pod was made).
    after: bool = False


@attrs.define
class FakePod:
    id: str
    body: dict[str, Any]
    machine: _fakepod.PodMachine
    status: str = "PROVISIONING"
    created_at: str = attrs.field(factory=_now)
    started_at: str | None = None
    started_mono: float | None = None
    reads: int = 0
    events: list[str] = attrs.field(factory=list)

    @property
    def gpu(self) -> dict[str, Any] | None:
        gpu = self.body.get("gpu")
        return None if gpu is None else {"id": gpu["id"], "count": int(gpu.get("count", 1))}


class FakeRunpod:
    """The server and its pods; :attr:`url` is the ``api_url`` for clusters.yaml."""

    def __init__(self, root: Path, *, workspace: str, api_key: str = API_KEY, catalog=CATALOG) -> None:
        self.root = root
        self.workspace = workspace  # the pod's /workspace (the tests' scratch_path)
        self.api_key = api_key
        self.catalog = [dict(g) for g in catalog]
        #: GPU id -> how many more pods of it can be placed (absent: unlimited).
        self.capacity: dict[str, int] = {}
        #: None: unlimited; 0: every create is refused with 402.
        self.balance: float | None = None
        self.faults: list[Fault] = []
        #: True: pods stay PROVISIONING (no machine free yet) until it is set back to False.
        self.hold_provisioning = False
        #: Pod ids whose DELETE is answered 204 while the pod keeps RUNNING (a terminate that
        #: did not take: RunPod terminates asynchronously, and a host can fail to).
        self.terminate_ignored: set[str] = set()
        self.pods: dict[str, FakePod] = {}
        self.gone: dict[str, FakePod] = {}
        #: (method, path, status) of every request, in order.
        self.log: list[tuple[str, str, int]] = []
        self.lock = threading.RLock()
        self._ids = (f"fk{n:04d}{os.getpid() % 1000:03d}" for n in itertools.count(1))
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="fake-runpod", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v2"

    # ------------------------------------------------------------------ steering

    def fail(self, status: int, *, method: str | None = None, path: str | None = None, times: int = 1,
             retry_after: int | None = None, detail: str | None = None, after: bool = False) -> None:
        with self.lock:
            self.faults.append(Fault(status, method, path, times, retry_after, detail, after))

    def lose(self, pod_id: str, how: str = "EXITED") -> None:
        """The pod dies under its job: EXITED (stopped, e.g. balance or host), ERROR, or
        TERMINATED (gone: 404 from now on)."""
        with self.lock:
            pod = self.pods[pod_id]
            pod.machine.kill()
            pod.events.append(f"lost:{how}")
            if how == "TERMINATED":
                self._delete(pod)
            else:
                self._wipe_container(pod)
                pod.status, pod.started_at, pod.started_mono = how, None, None

    def rekey(self, pod_id: str) -> None:
        """Give a running pod a new host key (a machine that is not the one runjob met)."""
        with self.lock:
            pod = self.pods[pod_id]
            pod.machine.kill()
            _fakepod.make_host_key(pod.machine.host_key.parent)
            self._boot(pod)

    def live_pods(self) -> list[FakePod]:
        with self.lock:
            return [p for p in self.pods.values() if p.status in LIVE]

    def pod_dir(self, pod_id: str) -> Path:
        return self.root / "pods" / pod_id

    def requests(self, method: str | None = None, path: str | None = None) -> list[tuple[str, str, int]]:
        return [r for r in self.log if (method is None or r[0] == method) and (path is None or re.search(path, r[1]))]

    def close(self) -> list[str]:
        """Kill every pod and stop the server; return the pods that were still live."""
        with self.lock:
            live = [f"{p.id} ({p.body.get('name')}, {p.status})" for p in self.pods.values() if p.status in LIVE]
            for pod in list(self.pods.values()):
                pod.machine.kill()
        self.server.shutdown()
        self.server.server_close()
        return live

    # ------------------------------------------------------------------ pod life

    def _mounts(self, pod: FakePod) -> list[tuple[Path, str]]:
        folder = self.pod_dir(pod.id)
        mounts = pod.body.get("mounts") or {}
        binds: list[tuple[Path, str]] = []
        if mounts.get("persistent"):
            binds.append((folder / "volume", mounts["persistent"]["path"]))
        for network in mounts.get("network") or ():
            binds.append((self.root / "network-volumes" / network["volumeId"], network["path"]))
        if not any(target == self.workspace for _, target in binds):
            binds.insert(0, (folder / "container" / "workspace", self.workspace))
        # The pod's own home: root's dotfiles of this machine (a pyenv init waiting on a lock,
        # say) are not the image's, and must not run in the pod's sessions.
        binds.insert(0, (folder / "container" / "root", "/root"))
        return binds

    def _wipe_container(self, pod: FakePod) -> None:
        # The container disk is ephemeral: a stop wipes it, a volume survives.
        shutil.rmtree(self.pod_dir(pod.id) / "container", ignore_errors=True)

    def _boot(self, pod: FakePod) -> None:
        env = dict(pod.body.get("env") or {})
        public_key = env.get("PUBLIC_KEY", "")
        gpu = pod.gpu or {"count": 0}
        pod_env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "RUNPOD_POD_ID": pod.id,
            "RUNPOD_DC_ID": "FAKE-LO-1", "RUNPOD_GPU_COUNT": str(gpu["count"]), "RUNPOD_PUBLIC_IP": "127.0.0.1",
            "RUNPOD_POD_HOSTNAME": f"{pod.id}-fake", **env,
        }
        authorized = "".join(line.strip() + "\n" for line in public_key.splitlines() if line.strip())
        # start() picks a new port each time (as a RunPod restart does) and adds it to the
        # environment as RUNPOD_TCP_PORT_22.
        port = pod.machine.start(env=pod_env, authorized_keys=authorized, mounts=self._mounts(pod))
        pod.status, pod.started_at, pod.started_mono = "RUNNING", _now(), time.monotonic()
        pod.events.append(f"running:{port}")

    def _advance(self, pod: FakePod) -> None:
        pod.reads += 1
        if pod.status == "PROVISIONING" and self.hold_provisioning:
            return
        if pod.status == "PROVISIONING":
            pod.status = "STARTING"
        elif pod.status == "STARTING":
            self._boot(pod)

    def _delete(self, pod: FakePod) -> None:
        pod.machine.kill()
        pod.status = "TERMINATED"
        self.pods.pop(pod.id, None)
        self.gone[pod.id] = pod
        shutil.rmtree(self.pod_dir(pod.id) / "container", ignore_errors=True)

    def pod_json(self, pod: FakePod) -> dict[str, Any]:
        body = pod.body
        running = pod.status == "RUNNING" and pod.machine.port is not None
        port = pod.machine.port if running else None
        direct = None
        if running and "22/tcp" in (body.get("ports") or []):
            direct = {"host": "127.0.0.1", "port": port, "username": "root", "command": f"ssh root@127.0.0.1 -p {port}"}
        proxy = None if pod.status == "PROVISIONING" else {
            "host": "ssh.runpod.io", "port": 22, "username": f"{pod.id}-64411eb2", "command": f"ssh {pod.id}-64411eb2@ssh.runpod.io"}
        gpu = pod.gpu
        price = 0.0
        if gpu and running:
            entry = next(g for g in self.catalog if g["id"] == gpu["id"])
            price = round(entry["price"]["community" if body.get("cloud") == "COMMUNITY" else "secure"] * gpu["count"], 4)
        mounts = body.get("mounts") or {}
        data: dict[str, Any] = {
            "id": pod.id, "name": body["name"], "status": pod.status, "actions": list(ACTIONS[pod.status]),
            "image": body.get("image", ""), "args": body.get("args", ""), "disk": body.get("disk", 50),
            "mounts": mounts, "ports": list(body.get("ports") or []), "env": dict(body.get("env") or {}),
            "registry": body.get("registry"), "cloud": body.get("cloud", "SECURE"),
            "dataCenterId": None if pod.status == "PROVISIONING" else "FAKE-LO-1",
            "cudaVersion": None if pod.status == "PROVISIONING" else "12.8",
            "ssh": {"proxy": proxy, "direct": direct}, "template": None, "cost": price, "locked": False,
            "runtime": None if not running else {
                "uptime": int(time.monotonic() - (pod.started_mono or time.monotonic())),
                "gpus": [], "ports": [{"private": 22, "public": port, "type": "tcp", "ip": "127.0.0.1"}]},
            "createdAt": pod.created_at, "startedAt": pod.started_at, "globalNetworking": {"enabled": False},
        }
        if gpu:
            data["gpu"] = gpu
        return data

    # ------------------------------------------------------------------ requests

    def create(self, body: Any) -> tuple[int, Any]:
        errors = _validate_create(body)
        if errors:
            return _problem(422, "request body does not match the schema", errors)
        mounts = body.get("mounts") or {}
        if mounts.get("persistent") and mounts.get("network"):
            return _problem(400, "mounts.persistent and mounts.network are mutually exclusive")
        if "gpu" in body:
            gpu_id = body["gpu"]["id"]
            entry = next((g for g in self.catalog if g["id"] == gpu_id), None)
            if entry is None:
                return _problem(400, f"unknown GPU type {gpu_id!r}")
            if int(body["gpu"].get("count", 1)) > entry["maxCount"]["community" if body.get("cloud") == "COMMUNITY" else "secure"]:
                return _problem(400, NO_CAPACITY)
            left = self.capacity.get(gpu_id)
            if left is not None and left <= 0:
                return _problem(400, NO_CAPACITY)
            if left is not None:
                self.capacity[gpu_id] = left - 1
        if self.balance is not None and self.balance <= 0:
            return _problem(402, "insufficient balance: add funds to create pods")
        pod_id = next(self._ids)
        pod = FakePod(pod_id, json.loads(json.dumps(body)), _fakepod.PodMachine(self.pod_dir(pod_id)))
        self.pod_dir(pod_id).mkdir(parents=True, exist_ok=True)
        self.pods[pod_id] = pod
        return 201, self.pod_json(pod)

    def action(self, pod: FakePod, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or set(body) != {"action"} or body["action"] not in ("start", "stop", "restart", "terminate"):
            return _problem(422, "invalid action request", ["$.action: value must be one of 'start', 'stop', 'restart', 'terminate'"])
        action = body["action"]
        if action not in ACTIONS[pod.status]:
            return _problem(409, f"cannot {action} a pod in status {pod.status}")
        if action == "terminate":
            self._delete(pod)
            return 204, None
        pod.machine.kill()
        if action == "stop":
            self._wipe_container(pod)
            pod.status, pod.started_at, pod.started_mono = "EXITED", None, None
        else:  # start / restart: back through STARTING, on a new port
            if action == "start":
                self._wipe_container(pod)
            pod.status, pod.started_at, pod.started_mono = "STARTING", None, None
        pod.events.append(action)
        return 200, self.pod_json(pod)

    def handle(self, method: str, path: str, headers: Any, body: Any) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            extra: dict[str, str] = {}
            if headers.get("Authorization") != f"Bearer {self.api_key}":
                return (*_problem(401, "missing or invalid API key"), extra)
            for fault in self.faults:
                if fault.times > 0 and (fault.method in (None, method)) and (fault.path is None or re.search(fault.path, path)):
                    fault.times -= 1
                    if fault.after:
                        self._route(method, path, body)
                    if fault.retry_after is not None:
                        extra["Retry-After"] = str(fault.retry_after)
                    default = NO_CAPACITY if fault.status == 400 else _TITLES.get(fault.status, "error").lower()
                    return (*_problem(fault.status, fault.detail or default), extra)
            return (*self._route(method, path, body), extra)

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if body is _BAD_JSON:
            return _problem(400, "request body is not valid JSON")
        if path == "/v2/pods" and method == "GET":
            for pod in list(self.pods.values()):
                self._advance(pod)
            return 200, {"pods": [self.pod_json(p) for p in self.pods.values()]}
        if path == "/v2/pods" and method == "POST":
            return self.create(body)
        if path == "/v2/catalog/gpus" and method == "GET":
            return 200, {"gpus": self.catalog}
        match = re.fullmatch(r"/v2/pods/([^/]+)(/action)?", path)
        if match:
            pod = self.pods.get(unquote(match.group(1)))
            if pod is None:
                return _problem(404, "pod not found")
            if match.group(2) and method == "POST":
                return self.action(pod, body)
            if not match.group(2) and method == "GET":
                self._advance(pod)
                return 200, self.pod_json(pod)
            if not match.group(2) and method == "DELETE":
                if pod.id not in self.terminate_ignored:
                    self._delete(pod)
                return 204, None
            return _problem(405, f"{method} is not allowed on {path}")
        return _problem(404, f"no route {method} {path}")


_BAD_JSON = object()


def _problem(status: int, detail: str, errors: list[str] | None = None) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return status, body


def _validate_create(body: Any) -> list[str]:
    """The ``CreatePodRequest`` schema checks a client can break (422 ``errors``)."""
    if not isinstance(body, dict):
        return ["$: expected object"]
    errors = [f"$: additional properties '{k}' not allowed" for k in sorted(set(body) - _CREATE_KEYS)]
    name = body.get("name")
    if not isinstance(name, str) or not name:
        errors.append("$.name: required, a string of length >= 1")
    if "image" not in body and "templateId" not in body:
        errors.append("$.image: required unless templateId is set")
    if ("gpu" in body) == ("cpu" in body):
        errors.append("$: exactly one of 'gpu' or 'cpu' is required")
    gpu = body.get("gpu")
    if gpu is not None:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("id"), str):
            errors.append("$.gpu.id: required, a string")
        elif set(gpu) - {"id", "count", "allowedCudaVersions", "minCudaVersion"}:
            errors.append(f"$.gpu: additional properties {sorted(set(gpu) - {'id', 'count'})} not allowed")
        elif not isinstance(gpu.get("count", 1), int) or gpu.get("count", 1) < 1:
            errors.append("$.gpu.count: must be an integer >= 1")
    if "cloud" in body and body["cloud"] not in ("SECURE", "COMMUNITY"):
        errors.append("$.cloud: value must be one of 'SECURE', 'COMMUNITY'")
    if "disk" in body and (not isinstance(body["disk"], int) or body["disk"] < 1):
        errors.append("$.disk: must be an integer >= 1")
    env = body.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        errors.append("$.env: must be an object of strings")
    ports = body.get("ports", [])
    if not isinstance(ports, list) or not all(isinstance(p, str) and re.fullmatch(r"\d+/(tcp|http|udp)", p) for p in ports):
        errors.append("$.ports: items must look like '22/tcp'")
    dcs = body.get("dataCenterIds", [])
    if not isinstance(dcs, list) or not all(isinstance(d, str) for d in dcs):
        errors.append("$.dataCenterIds: must be an array of strings")
    mounts = body.get("mounts", {})
    if not isinstance(mounts, dict) or set(mounts) - {"persistent", "network"}:
        errors.append("$.mounts: only 'persistent' or 'network'")
    else:
        persistent = mounts.get("persistent")
        if persistent is not None and (not isinstance(persistent, dict) or set(persistent) != {"size", "path"}
                                       or not isinstance(persistent["size"], int) or persistent["size"] < 10):
            errors.append("$.mounts.persistent: needs size (integer >= 10) and path")
        network = mounts.get("network")
        if network is not None and (not isinstance(network, list) or len(network) > 1
                                    or any(not isinstance(n, dict) or set(n) != {"volumeId", "path"} for n in network)):
            errors.append("$.mounts.network: at most one {volumeId, path}")
    return errors


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-runpod/0.1"
    fake: FakeRunpod

    def log_message(self, fmt: str, *args: Any) -> None:  # the fake keeps its own log
        return

    def _serve(self, method: str) -> None:
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = _BAD_JSON
        status, payload, extra = self.fake.handle(method, path, self.headers, body)
        self.fake.log.append((method, path, status))
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/problem+json" if status >= 400 else "application/json")
        self.send_header("RateLimit", '"default";r=99;t=60')
        self.send_header("RateLimit-Policy", '"default";q=100;w=60')
        for key, value in extra.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")


# ---------------------------------------------------------------------- for tests

#: GPU types of the test clusters, in order of preference.
TEST_GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe")


def cluster_config(fake: FakeRunpod, identity_file: Path, name: str = "pods", **settings: Any):
    """A ``type: runpod`` ClusterConfig pointing at *fake* (budget $10/h, $50 per job)."""
    from runjob_core.models import ClusterConfig

    from runjob_runpod._settings import RunpodSettings

    values = {"api_url": fake.url, "gpu_types": tuple(TEST_GPUS), "max_usd_per_hour": 10.0, "max_usd_total": 50.0, **settings}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return ClusterConfig(name=name, type="runpod", identity_file=str(identity_file), scratch_path=fake.workspace,
                         options=RunpodSettings(**values))


def only_job(home: Path | None = None):
    """The one job in the current project's store (its row): what a test ran."""
    from runjob_core import lifecycle

    context = lifecycle.open_context()
    try:
        (row,) = context.store.list_jobs()
        return row
    finally:
        context.close()


# ---------------------------------------------------------------------- pytest fixtures

try:
    import pytest
except ImportError:  # pragma: no cover - the fake also runs outside pytest (benchmarks)
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def pod_key(tmp_path_factory: Any) -> Path:
        """An ed25519 key pair for pods (a test cluster's identity_file)."""
        from runjob_core.transport import execute

        key = tmp_path_factory.mktemp("pod-key") / "id_ed25519"
        made = execute.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "runjob-runpod-test", "-f", str(key)])
        if not made.ok:
            raise RuntimeError(f"ssh-keygen failed: {made.stderr.strip()}")
        return key

    @pytest.fixture
    def fake_runpod(tmp_path_factory: Any, monkeypatch: Any) -> Iterator[FakeRunpod]:
        """A fake RunPod API with real-sshd pods; fails the test if a pod is left live."""
        why = _fakepod.can_run()
        if why:
            if os.environ.get("CI") == "true":
                pytest.fail(f"fake RunPod pods required on CI: {why}")
            pytest.skip(f"RunPod tier skipped: {why}")
        root = tmp_path_factory.mktemp("fake-runpod")
        fake = FakeRunpod(root, workspace=str(root / "workspace"))
        monkeypatch.setenv("RUNPOD_API_KEY", fake.api_key)
        try:
            yield fake
        finally:
            left = fake.close()
        if left:
            pytest.fail(f"pods left running after the test: {', '.join(left)}")
