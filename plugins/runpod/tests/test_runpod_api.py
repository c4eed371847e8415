"""The REST v2 client against the fake API over real HTTP: fields, errors, retries, the key."""

from __future__ import annotations

import email.utils
import time

import pytest

from runjob_runpod import _api
from runjob_runpod.testing import API_KEY

BODY = {"name": "runjob-rj-test-1-api", "image": "runpod/pytorch:2.4.0", "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1},
        "cloud": "SECURE", "disk": 20, "ports": ["22/tcp"], "env": {"PUBLIC_KEY": ""}}


@pytest.fixture
def client(fake_runpod):
    slept: list[float] = []
    client = _api.RunpodClient(fake_runpod.url, API_KEY, sleep=slept.append)
    client.slept = slept
    yield client
    for pod in fake_runpod.live_pods():
        client.terminate_pod(pod.id)
    client.close()


def test_pod_life_through_the_v2_fields(client, fake_runpod):
    pod = client.create_pod(BODY)
    assert (pod.status, pod.ssh_host, pod.cost_per_hour) == ("PROVISIONING", None, 0.0)
    seen = [pod.status]
    while not pod.reachable:
        pod = client.get_pod(pod.id)
        seen.append(pod.status)
    assert seen == ["PROVISIONING", "STARTING", "RUNNING"]
    assert (pod.ssh_host, pod.ssh_user, pod.gpu_id, pod.gpu_count) == ("127.0.0.1", "root", "NVIDIA GeForce RTX 4090", 1)
    assert pod.cost_per_hour == pytest.approx(0.69)
    assert pod.ssh_port == fake_runpod.pods[pod.id].machine.port
    assert [p.id for p in client.list_pods(name_prefix="runjob-rj-test-1-")] == [pod.id]
    assert client.list_pods(name_prefix="runjob-rj-other-") == []
    stopped = client.stop_pod(pod.id)
    assert (stopped.status, stopped.cost_per_hour, stopped.ssh_host) == ("EXITED", 0.0, None)
    assert client.terminate_pod(pod.id) is True
    with pytest.raises(_api.PodGone):
        client.get_pod(pod.id)
    assert client.terminate_pod(pod.id) is False  # 404: already gone


def test_gpu_catalog_has_prices_and_vram(client):
    gpus = {g.id: g for g in client.gpu_types()}
    h100 = gpus["NVIDIA H100 80GB HBM3"]
    assert (h100.memory_gb, h100.price("SECURE"), h100.price("COMMUNITY"), h100.price(None)) == (80, 2.69, 1.99, 2.69)


def test_a_refused_key_is_one_line_without_the_key(fake_runpod):
    wrong = "rp_wrong_secret_value"
    with _api.RunpodClient(fake_runpod.url, wrong) as client, pytest.raises(_api.AccountProblem) as caught:
        client.list_pods()
    text = str(caught.value)
    assert caught.value.status == 401 and "\n" not in text and "RUNPOD_API_KEY" in text
    assert wrong not in text


def test_no_balance_stops_with_one_line(client, fake_runpod):
    fake_runpod.balance = 0
    with pytest.raises(_api.AccountProblem) as caught:
        client.create_pod(BODY)
    assert caught.value.status == 402 and "balance" in str(caught.value) and "\n" not in str(caught.value)
    assert fake_runpod.pods == {}


def test_no_capacity_is_a_rejection_with_the_detail(client, fake_runpod):
    fake_runpod.capacity["NVIDIA GeForce RTX 4090"] = 0
    with pytest.raises(_api.Rejected) as caught:
        client.create_pod(BODY)
    assert "no longer any instances available" in caught.value.detail


def test_429_waits_for_retry_after_each_time(client, fake_runpod):
    fake_runpod.fail(429, method="GET", path=r"^/v2/pods$", times=3, retry_after=7)
    assert client.list_pods() == []
    assert client.slept == [7.0, 7.0, 7.0]
    assert [s for _m, _p, s in fake_runpod.requests("GET", r"^/v2/pods$")] == [429, 429, 429, 200]


def test_endless_429_gives_up_with_one_line(client, fake_runpod):
    fake_runpod.fail(429, times=1000, retry_after=1)
    with pytest.raises(_api.RunpodError) as caught:
        client.list_pods()
    assert caught.value.status == 429 and "rate-limiting" in str(caught.value)
    assert len(client.slept) == _api.MAX_RATE_LIMITED


def test_5xx_is_retried_with_backoff_then_given_up(client, fake_runpod):
    fake_runpod.fail(503, times=2)
    assert client.gpu_types()
    assert client.slept == list(_api.BACKOFF[:2])
    fake_runpod.fail(500, times=100)
    with pytest.raises(_api.RunpodError) as caught:
        client.gpu_types()
    assert "gave up after" in str(caught.value)


def test_a_create_that_failed_after_making_the_pod_is_not_repeated(client, fake_runpod):
    # A 502 after RunPod made the pod: retrying the POST would rent a second pod.
    fake_runpod.fail(502, method="POST", path=r"^/v2/pods$", after=True)
    pod = client.create_pod(BODY)
    assert list(fake_runpod.pods) == [pod.id]
    assert len(fake_runpod.requests("POST", r"^/v2/pods$")) == 1


def test_a_create_that_failed_before_making_the_pod_is_repeated(client, fake_runpod):
    fake_runpod.fail(500, method="POST", path=r"^/v2/pods$")
    pod = client.create_pod(BODY)
    assert list(fake_runpod.pods) == [pod.id]
    assert [s for _m, _p, s in fake_runpod.requests("POST", r"^/v2/pods$")] == [500, 201]


def test_422_lists_the_schema_errors(client):
    with pytest.raises(_api.RunpodError) as caught:
        client.create_pod({**BODY, "gpuTypeIds": ["NVIDIA GeForce RTX 4090"]})  # a v1 field
    assert caught.value.status == 422
    assert "additional properties 'gpuTypeIds' not allowed" in str(caught.value)


def test_an_invalid_action_is_a_conflict(client, fake_runpod):
    pod = client.create_pod(BODY)
    client.stop_pod(pod.id)
    with pytest.raises(_api.Conflict):
        client.stop_pod(pod.id)  # EXITED allows start and terminate only
    client.terminate_pod(pod.id)


def test_the_key_is_scrubbed_from_server_text(client, fake_runpod):
    fake_runpod.fail(400, detail=f"bad request from key {API_KEY}")
    with pytest.raises(_api.Rejected) as caught:
        client.list_pods()
    assert API_KEY not in str(caught.value) and "***" in str(caught.value)


def test_retry_after_as_seconds_or_http_date():
    assert _api._retry_after("12") == 12.0
    assert _api._retry_after(None) == 1.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= _api._retry_after(when) <= 31
    assert _api._retry_after("soon") == 1.0


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MY_RUNPOD_KEY", raising=False)
    with pytest.raises(_api.AccountProblem) as caught:
        _api.read_api_key("MY_RUNPOD_KEY", where="clusters.pods.settings.api_key_env in clusters.yaml")
    assert "MY_RUNPOD_KEY" in str(caught.value) and "clusters.yaml" in str(caught.value)
