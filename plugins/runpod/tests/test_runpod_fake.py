"""The fake RunPod API follows the v2 spec, and its pods behave like pods: real sshd, own disk, env in PID 1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import paramiko
import pytest

from runjob_core.errors import HostKeyMismatch, TransportError
from runjob_core.models import ClusterConfig
from runjob_runpod import _api, _ssh
from runjob_runpod.testing import API_KEY

SPEC = json.loads((Path(__file__).parent / "data" / "runpod-v2-pod-schemas.json").read_text())["schemas"]


def _required(name: str) -> set[str]:
    schema = SPEC[name]
    parts = schema.get("allOf", [schema])
    return {key for part in parts for key in part.get("required", ())}


@pytest.fixture
def http(fake_runpod):
    with httpx.Client(base_url=fake_runpod.url, headers={"Authorization": f"Bearer {API_KEY}"}) as client:
        yield client
    for pod in fake_runpod.live_pods():
        fake_runpod._delete(pod)


def _create(http, pod_key, **fields):
    body = {"name": "runjob-fake-test", "image": "img", "gpu": {"id": "NVIDIA GeForce RTX 4090"}, "ports": ["22/tcp"],
            "env": {"PUBLIC_KEY": Path(str(pod_key) + ".pub").read_text(), "MY_SETTING": "a b'c"}, **fields}
    response = http.post("/pods", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _connect(pod_json, pod_key, state_dir):
    pod = _api.Pod.from_json(pod_json)
    return _ssh.connect(ClusterConfig(name="t", type="runpod"), str(pod_key), pod.id, pod.ssh_host, pod.ssh_port, pod.ssh_user,
                        state_dir)


def _until_running(http, pod_id):
    seen = []
    while True:
        pod = http.get(f"/pods/{pod_id}").json()
        seen.append(pod["status"])
        if pod["status"] == "RUNNING":
            return pod, seen


def test_pods_carry_every_field_the_spec_requires(http, pod_key):
    created = _create(http, pod_key)
    assert _required("Pod") <= set(created)
    assert created["status"] == "PROVISIONING" and created["runtime"] is None and created["ssh"]["direct"] is None
    pod, seen = _until_running(http, created["id"])
    assert seen == ["STARTING", "RUNNING"]
    assert _required("Pod") <= set(pod) and set(pod["status"]) and pod["status"] in SPEC["PodStatus"]["enum"]
    assert set(pod["actions"]) <= set(SPEC["PodAction"]["enum"]) and pod["actions"] == ["stop", "restart", "terminate"]
    assert _required("PodSshEndpoint") <= set(pod["ssh"]["direct"])
    (port,) = pod["runtime"]["ports"]
    assert set(port) == set(SPEC["PodRuntimePort"]["properties"]) and port["private"] == 22
    assert pod["ssh"]["direct"]["port"] == port["public"] and pod["cost"] == 0.69
    listed = http.get("/pods").json()
    assert _required("ListPodsResponse") <= set(listed) and [p["id"] for p in listed["pods"]] == [pod["id"]]
    gpus = http.get("/catalog/gpus").json()
    assert all(_required("GpuType") <= set(g) for g in gpus["gpus"])


def test_errors_are_problem_json_with_rate_limit_headers(http, fake_runpod):
    fake_runpod.fail(429, retry_after=3)
    response = http.get("/pods")
    assert response.status_code == 429 and response.headers["Retry-After"] == "3"
    assert response.headers["Content-Type"] == "application/problem+json"
    assert _required("ErrorResponse") <= set(response.json())
    assert "RateLimit" in response.headers and "RateLimit-Policy" in response.headers
    assert http.get("/pods/nope").json() == {"title": "Not Found", "status": 404, "detail": "pod not found"}
    unauthorized = httpx.get(f"{fake_runpod.url}/pods", headers={"Authorization": "Bearer wrong"})
    assert unauthorized.status_code == 401


def test_the_create_body_is_checked_like_the_spec(http):
    bad = http.post("/pods", json={"name": "", "gpu": {"id": "x"}, "cpu": {"id": "y"}, "cloud": "ALL", "gpuCount": 1})
    assert bad.status_code == 422
    errors = bad.json()["errors"]
    assert any("gpuCount" in e for e in errors) and any("$.name" in e for e in errors) and any("exactly one" in e for e in errors)
    assert any("$.cloud" in e for e in errors) and any("$.image" in e for e in errors)


def test_a_running_pod_is_an_sshd_with_the_pod_env_in_pid_1(http, pod_key, fake_runpod, tmp_path):
    pod, _ = _until_running(http, _create(http, pod_key)["id"])
    transport = _connect(pod, pod_key, tmp_path)
    try:
        environ = transport.run_shell("tr '\\0' '\\n' < /proc/1/environ").stdout.splitlines()
        assert "MY_SETTING=a b'c" in environ and f"RUNPOD_POD_ID={pod['id']}" in environ
        assert f"RUNPOD_TCP_PORT_22={pod['ssh']['direct']['port']}" in environ
        # A login session does not inherit it (as on RunPod): the job script must source PID 1's.
        assert "MY_SETTING" not in transport.run_shell("env").stdout
        # The pod's /workspace is its own folder.
        transport.put_text(f"{fake_runpod.workspace}/mine.txt", "x")
        assert (fake_runpod.pod_dir(pod["id"]) / "container" / "workspace" / "mine.txt").is_file()
        assert not Path(fake_runpod.workspace, "mine.txt").exists()
    finally:
        transport.close()


def test_only_the_injected_key_logs_in(http, pod_key, tmp_path):
    pod, _ = _until_running(http, _create(http, pod_key)["id"])
    injected = paramiko.Ed25519Key.from_private_key_file(str(pod_key))
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    with pytest.raises(paramiko.AuthenticationException):
        client.connect("127.0.0.1", port=pod["ssh"]["direct"]["port"], username="root", pkey=paramiko.RSAKey.generate(2048),
                       look_for_keys=False, allow_agent=False)
    client.connect("127.0.0.1", port=pod["ssh"]["direct"]["port"], username="root", pkey=injected,
                   look_for_keys=False, allow_agent=False)
    client.close()


def test_stop_start_gives_a_new_port_and_the_pin_follows_the_pod(http, pod_key, fake_runpod, tmp_path):
    pod, _ = _until_running(http, _create(http, pod_key, mounts={"persistent": {"size": 20, "path": "/vol"}})["id"])
    first = _connect(pod, pod_key, tmp_path)
    first.run(["true"])
    first.close()
    pinned = _ssh.pin_path(tmp_path, pod["id"]).read_text().split()[1:]
    stopped = http.post(f"/pods/{pod['id']}/action", json={"action": "stop"}).json()
    assert (stopped["status"], stopped["cost"], stopped["runtime"], stopped["ssh"]["direct"]) == ("EXITED", 0.0, None, None)
    assert http.post(f"/pods/{pod['id']}/action", json={"action": "stop"}).status_code == 409
    assert http.post(f"/pods/{pod['id']}/action", json={"action": "start"}).status_code == 200
    again, _ = _until_running(http, pod["id"])
    assert again["ssh"]["direct"]["port"] != pod["ssh"]["direct"]["port"]
    second = _connect(again, pod_key, tmp_path)
    assert second.run(["true"]).ok  # same host key at the new port: accepted
    second.close()
    assert _ssh.pin_path(tmp_path, pod["id"]).read_text().split()[1:] == pinned
    fake_runpod.rekey(pod["id"])
    rekeyed = http.get(f"/pods/{pod['id']}").json()
    third = _connect(rekeyed, pod_key, tmp_path)
    with pytest.raises(HostKeyMismatch, match=f"pinned pod {pod['id']}'s key when it created the pod.*not the machine runjob rented"):
        third.run(["true"])
    assert http.delete(f"/pods/{pod['id']}").status_code == 204
    assert http.get(f"/pods/{pod['id']}").status_code == 404


def test_a_stop_wipes_the_container_disk_and_keeps_the_volume(http, pod_key, fake_runpod, tmp_path):
    volume = str(Path(fake_runpod.root) / "volume-mount")
    pod, _ = _until_running(http, _create(http, pod_key, mounts={"persistent": {"size": 20, "path": volume}})["id"])
    transport = _connect(pod, pod_key, tmp_path)
    transport.put_text(f"{volume}/kept.txt", "kept")
    transport.put_text(f"{fake_runpod.workspace}/wiped.txt", "wiped")
    transport.close()
    http.post(f"/pods/{pod['id']}/action", json={"action": "stop"})
    http.post(f"/pods/{pod['id']}/action", json={"action": "start"})
    again, _ = _until_running(http, pod["id"])
    transport = _connect(again, pod_key, tmp_path)
    try:
        assert transport.read_text(f"{volume}/kept.txt") == "kept"
        assert transport.stat(f"{fake_runpod.workspace}/wiped.txt") is None
    finally:
        transport.close()


def test_a_lost_pod_kills_its_processes(http, pod_key, fake_runpod, tmp_path):
    pod, _ = _until_running(http, _create(http, pod_key)["id"])
    transport = _connect(pod, pod_key, tmp_path)
    marker = f"runjob-fake-job-{pod['id']}"
    transport.run_shell(f"{{ nohup setsid bash -c 'exec -a {marker} sleep 300' > /dev/null 2>&1 < /dev/null & }}")
    transport.close()
    import subprocess

    def running() -> bool:
        return marker in subprocess.run(["ps", "-eo", "cmd"], capture_output=True, text=True).stdout.split()

    assert running()
    fake_runpod.lose(pod["id"], "ERROR")
    assert http.get(f"/pods/{pod['id']}").json()["status"] == "ERROR"
    assert not running()
    http.delete(f"/pods/{pod['id']}")


def test_closing_the_fake_kills_every_pod_and_names_the_live_ones(pod_key, tmp_path):
    # What the fake_runpod fixture does at teardown, failing the test when this list is not empty.
    from runjob_runpod import _fakepod
    from runjob_runpod.testing import FakeRunpod

    if _fakepod.can_run():
        pytest.skip(_fakepod.can_run())
    fake = FakeRunpod(tmp_path, workspace=str(tmp_path / "workspace"))
    with httpx.Client(base_url=fake.url, headers={"Authorization": f"Bearer {API_KEY}"}) as http:
        pod, _ = _until_running(http, _create(http, pod_key)["id"])
        waiting = _create(http, pod_key, name="runjob-still-provisioning")
    pid = fake.pods[pod["id"]].machine.pid
    left = fake.close()
    assert left == [f"{pod['id']} (runjob-fake-test, RUNNING)", f"{waiting['id']} (runjob-still-provisioning, PROVISIONING)"]
    assert not _fakepod._alive(pid)
