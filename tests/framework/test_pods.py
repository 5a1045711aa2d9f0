"""Pod helpers: kubelet-style status writes through the status subresource, with retries."""

from __future__ import annotations

import datetime as dt
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from framework_helpers import pod_body

from envtest import ApiCalls, Clients, Pods, ResourceError, pod_is_ready, request, update_pod_status

OLD = "2020-01-01T00:00:00Z"
CONDITIONS = {"PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady",
              "Ready"}


def conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in pod["status"].get("conditions") or []}


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def backdate(k8s: Clients, name: str, namespace: str) -> None:
    """Set every condition's lastTransitionTime to 2020, so a rewrite is unmistakable."""
    def mutate(pod: dict[str, Any]) -> None:
        for condition in pod["status"].get("conditions") or []:
            condition["lastTransitionTime"] = OLD
    update_pod_status(k8s.api_client, name, namespace, mutate)


@pytest.fixture
def pod(k8s: Clients, namespace: str) -> str:
    k8s.core.create_namespaced_pod(namespace, pod_body("app", containers=("main", "sidecar")))
    return "app"


def test_set_running_fills_the_status_a_kubelet_writes(pods: Pods, k8s: Clients,
                                                       namespace: str, pod: str) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    returned = pods.set_running(pod)
    stored = request(k8s.api_client, "GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
    assert stored["status"] == returned["status"]  # what the server kept, not a local copy
    status = stored["status"]
    assert status["phase"] == "Running"
    assert pod_is_ready(stored)
    found = conditions(stored)
    assert set(found) == CONDITIONS
    for condition in found.values():
        assert condition["status"] == "True"
        assert parse_time(condition["lastTransitionTime"]) >= before
    assert [c["name"] for c in status["containerStatuses"]] == ["main", "sidecar"]
    ids = set()
    for container in status["containerStatuses"]:
        assert container["ready"] is True and container["started"] is True
        assert container["containerID"].startswith("containerd://")
        assert container["image"] == f"example.com/{container['name']}:1"
        assert container["restartCount"] == 0
        assert parse_time(container["state"]["running"]["startedAt"]) >= before
        ids.add(container["containerID"])
    assert len(ids) == 2
    assert status["podIP"].startswith("10.244.")
    assert status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["hostIP"] and status["hostIPs"] == [{"ip": status["hostIP"]}]
    assert parse_time(status["startTime"]) >= before

    # Through the typed client too: the status parses as a kubelet's would.
    typed = k8s.core.read_namespaced_pod(pod, namespace)
    assert typed.status.pod_ip == status["podIP"]
    assert typed.status.container_statuses[0].state.running.started_at is not None


def test_set_running_not_ready_and_explicit_ip(pods: Pods, pod: str) -> None:
    status = pods.set_running(pod, ready=False, pod_ip="10.99.0.7")["status"]
    assert status["phase"] == "Running"
    assert status["podIP"] == "10.99.0.7"
    found = {c["type"]: c for c in status["conditions"]}
    assert found["Ready"]["status"] == "False"
    assert found["Ready"]["reason"] == "ContainersNotReady"
    assert found["PodScheduled"]["status"] == "True"
    assert all(c["ready"] is False and c["started"] is True
               for c in status["containerStatuses"])


def test_ready_flips_change_transition_times_only_on_a_flip(pods: Pods, k8s: Clients,
                                                            namespace: str, pod: str) -> None:
    first = pods.set_running(pod)
    ip, started = first["status"]["podIP"], first["status"]["startTime"]
    container_started = first["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    backdate(k8s, pod, namespace)

    same = conditions(pods.set_ready(pod))  # already ready: no flip, nothing moves
    assert {c["lastTransitionTime"] for c in same.values()} == {OLD}

    flipped = pods.set_not_ready(pod)
    found = conditions(flipped)
    assert found["Ready"]["status"] == found["ContainersReady"]["status"] == "False"
    assert found["Ready"]["reason"] == "ContainersNotReady"
    assert found["Ready"]["lastTransitionTime"] != OLD
    assert found["ContainersReady"]["lastTransitionTime"] != OLD
    for unchanged in ("PodScheduled", "Initialized", "PodReadyToStartContainers"):
        assert found[unchanged]["lastTransitionTime"] == OLD
    assert not pod_is_ready(flipped)
    assert [c["ready"] for c in flipped["status"]["containerStatuses"]] == [False, False]
    # A readiness flip is not a restart: IP, start times and container IDs stay.
    assert flipped["status"]["podIP"] == ip and flipped["status"]["startTime"] == started
    assert (flipped["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
            == container_started)
    assert ([c["containerID"] for c in flipped["status"]["containerStatuses"]]
            == [c["containerID"] for c in first["status"]["containerStatuses"]])

    backdate(k8s, pod, namespace)
    assert conditions(pods.set_not_ready(pod))["Ready"]["lastTransitionTime"] == OLD
    ready = pods.set_ready(pod)
    assert conditions(ready)["Ready"]["status"] == "True"
    assert "reason" not in conditions(ready)["Ready"]
    assert conditions(ready)["Ready"]["lastTransitionTime"] != OLD
    assert conditions(ready)["PodScheduled"]["lastTransitionTime"] == OLD
    assert pod_is_ready(ready)


def test_set_ready_on_a_pending_pod_makes_it_running(pods: Pods, pod: str) -> None:
    assert pod_is_ready(pods.set_ready(pod))


def test_set_failed(pods: Pods, pod: str) -> None:
    pods.set_running(pod)
    status = pods.set_failed(pod, exit_code=3, reason="OOMKilled", message="out of memory")[
        "status"]
    assert status["phase"] == "Failed"
    assert status["reason"] == "OOMKilled" and status["message"] == "out of memory"
    found = {c["type"]: c for c in status["conditions"]}
    assert found["Ready"]["status"] == "False"
    for container in status["containerStatuses"]:
        terminated = container["state"]["terminated"]
        assert terminated["exitCode"] == 3 and terminated["reason"] == "OOMKilled"
        assert terminated["finishedAt"] >= terminated["startedAt"]
        assert container["ready"] is False and container["started"] is False


def test_set_succeeded(pods: Pods, pod: str) -> None:
    pods.set_running(pod)
    status = pods.set_succeeded(pod)["status"]
    assert status["phase"] == "Succeeded"
    assert "reason" not in status
    found = {c["type"]: c for c in status["conditions"]}
    assert found["Ready"]["status"] == "False" and found["Ready"]["reason"] == "PodCompleted"
    for container in status["containerStatuses"]:
        assert container["state"]["terminated"]["exitCode"] == 0
        assert container["state"]["terminated"]["reason"] == "Completed"


def test_crash_counts_restarts_into_crash_loop_back_off(pods: Pods, pod: str) -> None:
    running = pods.set_running(pod)["status"]
    first = pods.crash(pod, exit_code=137)["status"]
    assert first["phase"] == "Running"
    assert {c["type"]: c["status"] for c in first["conditions"]}["Ready"] == "False"
    for container in first["containerStatuses"]:
        assert container["restartCount"] == 1
        assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert container["lastState"]["terminated"]["exitCode"] == 137
        assert container["ready"] is False
    second = pods.crash(pod)["status"]
    assert [c["restartCount"] for c in second["containerStatuses"]] == [2, 2]
    assert second["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1

    back = pods.set_running(pod)["status"]  # the container came back: a new container ID
    assert [c["restartCount"] for c in back["containerStatuses"]] == [2, 2]
    assert (back["containerStatuses"][0]["containerID"]
            != running["containerStatuses"][0]["containerID"])
    assert back["podIP"] == running["podIP"]


def test_missing_pod_gives_a_clear_error(pods: Pods, namespace: str) -> None:
    with pytest.raises(ResourceError, match=f"cannot read Pod {namespace}/ghost: HTTP 404"):
        pods.set_running("ghost")


def test_concurrent_status_writers_both_succeed_after_a_conflict(
        k8s: Clients, namespace: str, pod: str, api_calls: ApiCalls) -> None:
    # Both writers read the same resourceVersion before either writes: one must conflict,
    # re-read and write again, keeping the other's change.
    barrier = threading.Barrier(2, timeout=10)
    calls = {"A": 0, "B": 0}

    def writer(mark: str) -> dict[str, Any]:
        def mutate(obj: dict[str, Any]) -> None:
            calls[mark] += 1
            if calls[mark] == 1:
                barrier.wait()
            obj["status"].setdefault("conditions", []).append(
                {"type": f"example.com/{mark}", "status": "True"})
        return update_pod_status(k8s.api_client, pod, namespace, mutate)

    since = api_calls.mark()
    with ThreadPoolExecutor(2) as pool:
        results = [f.result(timeout=30) for f in [pool.submit(writer, m) for m in "AB"]]
    assert sorted(calls.values()) == [1, 2]  # exactly one retry
    final = conditions(results[0] if calls["A"] == 2 else results[1])
    assert {"example.com/A", "example.com/B"} <= set(final)
    writes = api_calls.calls(verb="update", resource="pods", subresource="status", name=pod,
                             since=since)
    assert sorted(c.code for c in writes) == [200, 200, 409]


def test_concurrent_helpers_on_one_pod_both_succeed(pods: Pods, k8s: Clients, namespace: str,
                                                    pod: str) -> None:
    pods.set_running(pod)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(pods.crash, pod) for _ in range(6)]
        futures += [pool.submit(pods.set_not_ready, pod) for _ in range(6)]
        for future in futures:
            future.result(timeout=30)
    stored = k8s.core.read_namespaced_pod_status(pod, namespace)
    assert [c.restart_count for c in stored.status.container_statuses] == [6, 6]  # none lost
