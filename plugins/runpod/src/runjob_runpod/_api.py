"""A small client for RunPod's REST API v2 (``https://api.runpod.io/v2``), over httpx.

Field names follow RunPod's OpenAPI file (``api-reference-v2/openapi.json`` in the public
``runpod/docs`` repository): ``CreatePodRequest`` (``name``, ``image``, ``gpu{id,count}``,
``cloud``, ``dataCenterIds``, ``disk``, ``mounts{persistent|network}``, ``ports``, ``env``),
``Pod`` (``status``, ``actions``, ``cost``, ``ssh.direct``, ``runtime.ports``),
``ListPodsResponse`` (``{"pods": [...]}``), ``ListGpuTypesResponse`` and the
``application/problem+json`` ``ErrorResponse`` (``title``, ``status``, ``detail``, ``errors``).

What each failure means (the create operation's own retry table):

* 400: a cross-field rule or *no capacity* for this GPU type: try the next one;
* 401 / 403: the key is refused / lacks access; 402: no balance: stop, one line;
* 404: the pod is gone; 409: the action is not valid in the pod's status now;
* 422: the body breaks the contract (a bug here): never retried;
* 429: wait ``Retry-After`` seconds, then the same call again (bounded);
* 5xx and dropped connections: the same call again with backoff (bounded). A create is
  only repeated after a list shows no pod with its name, so a retry never rents twice.

The API key is read from the environment variable the cluster names, sent only in the
``Authorization`` header, and scrubbed from every message this module produces.
"""

from __future__ import annotations

import email.utils
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from runjob_core.errors import BackendError

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.runpod.io/v2"
#: Pod statuses (``PodStatus``).
PROVISIONING, STARTING, RUNNING, EXITED, ERROR, TERMINATED = (
    "PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED")
#: Delays before repeating a call after a 5xx or a dropped connection.
BACKOFF = (0.5, 1.0, 2.0, 4.0, 8.0)
#: At most this many 429 answers in a row, and this long waiting for them in total.
MAX_RATE_LIMITED = 20
MAX_RATE_WAIT = 300.0


class RunpodError(BackendError):
    """RunPod answered with an error (problem+json); ``status`` is the HTTP status."""

    def __init__(self, message: str, *, status: int | None = None, detail: str = "", errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.errors = tuple(errors)


class PodGone(RunpodError):
    """404: the pod does not exist (terminated, or never was)."""


class Rejected(RunpodError):
    """400: the request was refused as it is; for a create, possibly no capacity."""


class AccountProblem(RunpodError):
    """401, 402 or 403: the key, the balance or the account's access; no retry helps."""


class Conflict(RunpodError):
    """409: the action is not valid in the pod's current status."""


@attrs.frozen
class Pod:
    """The fields of a v2 ``Pod`` that runjob reads."""

    id: str
    name: str
    status: str
    actions: tuple[str, ...]
    cost_per_hour: float
    gpu_id: str | None
    gpu_count: int
    ssh_host: str | None
    ssh_port: int | None
    ssh_user: str | None
    data_center: str | None
    created_at: str | None
    started_at: str | None
    uptime: int | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pod:
        ssh = data.get("ssh") or {}
        direct = ssh.get("direct") or {}
        runtime = data.get("runtime") or {}
        host, port = direct.get("host"), direct.get("port")
        if not (host and port):
            # ssh.direct is derived from the runtime's 22/tcp mapping; read that if the
            # block is missing (older answers), the way RunPod's own SDK does.
            for mapping in runtime.get("ports") or ():
                if mapping.get("private") == 22 and mapping.get("public") and mapping.get("ip"):
                    host, port = mapping["ip"], mapping["public"]
        gpu = data.get("gpu") or {}
        return cls(
            id=str(data["id"]), name=str(data.get("name") or ""), status=str(data.get("status") or ""),
            actions=tuple(data.get("actions") or ()), cost_per_hour=float(data.get("cost") or 0.0),
            gpu_id=gpu.get("id"), gpu_count=int(gpu.get("count") or 0), ssh_host=host,
            ssh_port=int(port) if port else None, ssh_user=direct.get("username") or ("root" if host else None),
            data_center=data.get("dataCenterId"), created_at=data.get("createdAt"), started_at=data.get("startedAt"),
            uptime=runtime.get("uptime"),
        )

    @property
    def reachable(self) -> bool:
        return self.status == RUNNING and bool(self.ssh_host and self.ssh_port)


@attrs.frozen
class GpuType:
    """One entry of ``GET /v2/catalog/gpus``: prices are USD per hour for one GPU."""

    id: str
    name: str
    memory_gb: int
    secure: bool
    community: bool
    price_secure: float
    price_community: float
    max_count_secure: int
    max_count_community: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuType:
        price, most = data.get("price") or {}, data.get("maxCount") or {}
        return cls(
            id=str(data["id"]), name=str(data.get("name") or data["id"]), memory_gb=int(data.get("memory") or 0),
            secure=bool(data.get("secure")), community=bool(data.get("community")),
            price_secure=float(price.get("secure") or 0.0), price_community=float(price.get("community") or 0.0),
            max_count_secure=int(most.get("secure") or 0), max_count_community=int(most.get("community") or 0),
        )

    def price(self, cloud: str | None) -> float:
        """List price per GPU-hour in *cloud* (``None`` = any cloud: the dearer of the two
        offered, so a budget check never underestimates)."""
        if cloud == "SECURE":
            return self.price_secure
        if cloud == "COMMUNITY":
            return self.price_community
        offered = [p for p, ok in ((self.price_secure, self.secure), (self.price_community, self.community)) if ok]
        return max(offered or [self.price_secure, self.price_community])

    def max_count(self, cloud: str | None) -> int:
        if cloud == "SECURE":
            return self.max_count_secure
        if cloud == "COMMUNITY":
            return self.max_count_community
        return max(self.max_count_secure, self.max_count_community)


def read_api_key(env_var: str, *, where: str) -> str:
    key = os.environ.get(env_var, "").strip()
    if not key:
        message = (f"no RunPod API key: the environment variable {env_var} ({where}) is not set; "
                   "create a key in the RunPod console (Settings > API Keys) and export it")
        raise AccountProblem(message)
    return key


class RunpodClient:
    """One authenticated session with the API; cheap to build, reuse it for a command."""

    def __init__(self, api_url: str, api_key: str, *, key_name: str = "RUNPOD_API_KEY", timeout: float = 30.0,
                 transport: Any = None, sleep: Callable[[float], None] = time.sleep,
                 on_wait: Callable[[str], None] | None = None) -> None:
        import httpx

        self.api_url = api_url.rstrip("/")
        self._key = api_key
        self._key_name = key_name
        self._sleep = sleep
        self._on_wait = on_wait
        self._client = httpx.Client(
            base_url=self.api_url, timeout=timeout, transport=transport,
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                     "User-Agent": "runjob-runpod/0.1"},
        )
        #: Every request sent (method and path), in order: tests and benchmarks count them.
        self.requests: list[tuple[str, str]] = []
        #: Seconds slept waiting for Retry-After or backoff, in order.
        self.waits: list[float] = []

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RunpodClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ pods

    def list_pods(self, *, name_prefix: str | None = None) -> list[Pod]:
        """All pods of the account (``GET /pods``; v2 has no server-side filter)."""
        data = self._json("GET", "/pods")
        pods = [Pod.from_json(p) for p in data.get("pods") or ()]
        return [p for p in pods if name_prefix is None or p.name.startswith(name_prefix)]

    def get_pod(self, pod_id: str) -> Pod:
        """``GET /pods/{id}``; :class:`PodGone` when it does not exist."""
        return Pod.from_json(self._json("GET", f"/pods/{_segment(pod_id)}"))

    def create_pod(self, body: Mapping[str, Any]) -> Pod:
        """``POST /pods``. After a 5xx or a dropped connection the create is repeated only
        when no pod with the same name exists (a retry must never rent a second pod)."""
        name = str(body["name"])

        def already_there() -> Pod | None:
            found = self.list_pods(name_prefix=name)
            return next((p for p in found if p.name == name), None)

        response = self._send("POST", "/pods", json=dict(body), before_retry=already_there)
        if isinstance(response, Pod):
            return response
        return Pod.from_json(response.json())

    def stop_pod(self, pod_id: str) -> Pod:
        return Pod.from_json(self._json("POST", f"/pods/{_segment(pod_id)}/action", json={"action": "stop"}))

    def terminate_pod(self, pod_id: str) -> bool:
        """``DELETE /pods/{id}``: True if this call terminated it, False if it was gone."""
        try:
            self._send("DELETE", f"/pods/{_segment(pod_id)}")
        except PodGone:
            return False
        return True

    def gpu_types(self) -> list[GpuType]:
        """The GPU catalog (``GET /catalog/gpus``) with list prices per GPU-hour."""
        return [GpuType.from_json(g) for g in self._json("GET", "/catalog/gpus").get("gpus") or ()]

    # ------------------------------------------------------------------ plumbing

    def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._send(method, path, **kwargs)
        try:
            data = response.json()
        except ValueError:
            message = f"RunPod answered {method} {path} with {response.status_code} but not JSON: {self._scrub(response.text[:200])}"
            raise RunpodError(message, status=response.status_code) from None
        if not isinstance(data, dict):
            message = f"RunPod answered {method} {path} with an unexpected {type(data).__name__}"
            raise RunpodError(message, status=response.status_code)
        return data

    def _send(self, method: str, path: str, *, json: Any = None, before_retry: Callable[[], Any] | None = None) -> Any:
        import httpx

        # A create is not idempotent: it is repeated only after *before_retry* says no pod
        # was made; everything else (GET, DELETE, actions) may simply be sent again.
        failures = rate_limited = 0
        waited = 0.0
        while True:
            self.requests.append((method, path))
            try:
                response = self._client.request(method, path, json=json)
            except httpx.TransportError as exc:
                reason = f"cannot reach RunPod at {self.api_url} ({type(exc).__name__}: {self._scrub(str(exc))})"
                failures = self._backoff(failures, reason)
                found = before_retry() if before_retry else None
                if found is not None:
                    return found
                continue
            status = response.status_code
            if status < 400:
                return response
            if status == 429:
                rate_limited += 1
                delay = _retry_after(response.headers.get("Retry-After"))
                if rate_limited > MAX_RATE_LIMITED or waited + delay > MAX_RATE_WAIT:
                    message = (f"RunPod kept rate-limiting {method} {path} ({rate_limited} answers of 429 over {waited:.0f} s); "
                               "wait a few minutes and run the command again")
                    raise RunpodError(message, status=429)
                self._wait(delay, f"RunPod rate limit: waiting {delay:g} s (Retry-After) before {method} {path}")
                waited += delay
                continue
            if status >= 500:
                failures = self._backoff(failures, f"RunPod answered {method} {path} with {status}: {self._problem(response)[0]}")
                found = before_retry() if before_retry else None
                if found is not None:
                    return found
                continue
            raise self._error(method, path, response)

    def _backoff(self, failures: int, reason: str) -> int:
        if failures >= len(BACKOFF):
            raise RunpodError(f"{reason}; gave up after {failures + 1} tries")
        self._wait(BACKOFF[failures], f"{reason}; trying again in {BACKOFF[failures]:g} s")
        return failures + 1

    def _wait(self, seconds: float, why: str) -> None:
        log.info("%s", why)
        if self._on_wait is not None:
            self._on_wait(why)
        self.waits.append(seconds)
        self._sleep(seconds)

    def _problem(self, response: Any) -> tuple[str, list[str]]:
        """The ``detail`` (else ``title``) of a problem+json body, and its ``errors``."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            text = str(body.get("detail") or body.get("title") or body.get("message") or "")
            errors = [str(e) for e in body.get("errors") or () if e]
        else:
            text, errors = response.text[:200].strip(), []
        return self._scrub(text or response.reason_phrase or "no detail"), [self._scrub(e) for e in errors]

    def _error(self, method: str, path: str, response: Any) -> RunpodError:
        status = response.status_code
        detail, errors = self._problem(response)
        if status == 401:
            message = (f"RunPod refused the API key in ${self._key_name} (401: {detail}); create a new key in the RunPod "
                       f"console (Settings > API Keys) and export it as {self._key_name}")
            return AccountProblem(message, status=status, detail=detail)
        if status == 402:
            message = f"RunPod says the account's balance is too low (402: {detail}); add funds in the RunPod console, then run again"
            return AccountProblem(message, status=status, detail=detail)
        if status == 403:
            message = f"the RunPod key in ${self._key_name} may not {method} {path} (403: {detail}); give the key read/write access to pods"
            return AccountProblem(message, status=status, detail=detail)
        if status == 404:
            return PodGone(f"RunPod: not found ({method} {path}: {detail})", status=status, detail=detail)
        if status == 409:
            return Conflict(f"RunPod: {method} {path} is not possible now (409: {detail})", status=status, detail=detail)
        if status == 400:
            return Rejected(f"RunPod refused {method} {path} (400: {detail})", status=status, detail=detail, errors=errors)
        more = f" [{'; '.join(errors)}]" if errors else ""
        return RunpodError(f"RunPod refused {method} {path} ({status}: {detail}){more}", status=status, detail=detail, errors=errors)

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def _segment(pod_id: str) -> str:
    from urllib.parse import quote

    return quote(pod_id, safe="")


def _retry_after(value: str | None) -> float:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date); 1 if absent."""
    if not value:
        return 1.0
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 1.0
    return max(0.0, when.timestamp() - time.time())
