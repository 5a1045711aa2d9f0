"""PodSimulator: a stand-in kubelet for Pods matching a selector, following a PodPlan."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from typing import Any

from framework_helpers import pod_body

from envtest import (
    Clients,
    PodPlan,
    PodSimulator,
    consistently,
    eventually,
    pod_is_ready,
    request,
    watch,
)

Simulator = Callable[..., PodSimulator]


def phase(k8s: Clients, namespace: str, name: str) -> str:
    return k8s.core.read_namespaced_pod(name, namespace).status.phase


def observe(k8s: Clients, namespace: str, name: str, create: Callable[[], Any],
            until: Callable[[dict[str, Any]], bool], timeout: int = 20) -> list[tuple[str, bool]]:
    """Every (phase, ready) state the Pod goes through, from a watch opened before ``create``."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    version = request(k8s.api_client, "GET", path)["metadata"]["resourceVersion"]
    create()
    seen: list[tuple[str, bool]] = []
    for event in watch(k8s.api_client, path, timeout_seconds=timeout,
                       query={"resourceVersion": version,
                              "fieldSelector": f"metadata.name={name}"}):
        pod = event.get("object") or {}
        if event.get("type") not in ("ADDED", "MODIFIED"):
            continue
        state = ((pod.get("status") or {}).get("phase", ""), pod_is_ready(pod))
        if not seen or seen[-1] != state:
            seen.append(state)
        if until(pod):
            return seen
    raise AssertionError(f"Pod {name} never reached the expected state; saw {seen}")


def test_selector_is_respected(pod_simulator: Simulator, k8s: Clients, namespace: str) -> None:
    simulator = pod_simulator(selector="sim=yes")
    # The non-matching Pod is created first: had the simulator taken it, it would be done
    # before the matching one.
    k8s.core.create_namespaced_pod(namespace, pod_body("ignored", {"sim": "no"}))
    k8s.core.create_namespaced_pod(namespace, pod_body("unlabelled"))
    k8s.core.create_namespaced_pod(namespace, pod_body("taken", {"sim": "yes"}))
    eventually(lambda: simulator.states("taken") == ["Running", "Ready"], timeout=10)
    consistently(lambda: phase(k8s, namespace, "ignored") == "Pending"
                 and phase(k8s, namespace, "unlabelled") == "Pending", duration=0.5)
    assert simulator.states("ignored") == simulator.states("unlabelled") == []
    assert simulator.errors == []


def test_plan_moves_pod_to_running_then_ready_in_order(pod_simulator: Simulator, k8s: Clients,
                                                      namespace: str) -> None:
    plan = PodPlan(running_after=0.2, ready_after=0.3)
    simulator = pod_simulator(selector="app=web", plan=plan)
    states = observe(k8s, namespace, "web",
                     lambda: k8s.core.create_namespaced_pod(namespace,
                                                            pod_body("web", {"app": "web"})),
                     until=pod_is_ready)
    assert states == [("Pending", False), ("Running", False), ("Running", True)]
    eventually(lambda: simulator.states("web") == ["Running", "Ready"], timeout=5)
    running, ready = [t for t in simulator.transitions if t.pod == "web"]
    assert ready.at - running.at >= plan.ready_after
    assert running.namespace == namespace
    stored = k8s.core.read_namespaced_pod("web", namespace).status
    assert {c.type: c.status for c in stored.conditions}["Ready"] == "True"
    assert stored.container_statuses[0].ready is True


def test_failed_plan(pod_simulator: Simulator, k8s: Clients, namespace: str) -> None:
    simulator = pod_simulator(plan=PodPlan(outcome="failed", finish_after=0.1, exit_code=7))
    states = observe(k8s, namespace, "job",
                     lambda: k8s.core.create_namespaced_pod(namespace, pod_body("job")),
                     until=lambda p: p["status"].get("phase") == "Failed")
    assert states == [("Pending", False), ("Running", False), ("Failed", False)]
    # Recorded once the write returned, which may be just after the watch saw it.
    eventually(lambda: simulator.states("job") == ["Running", "Failed"], timeout=5)
    terminated = k8s.core.read_namespaced_pod("job", namespace).status.container_statuses[0]
    assert terminated.state.terminated.exit_code == 7


def test_succeeded_plan(pod_simulator: Simulator, k8s: Clients, namespace: str) -> None:
    simulator = pod_simulator(plan=PodPlan(outcome="succeeded"))
    k8s.core.create_namespaced_pod(namespace, pod_body("batch"))
    eventually(lambda: phase(k8s, namespace, "batch") == "Succeeded", timeout=10)
    # the simulator records a state once its write is answered: a moment after a reader
    # of the Pod may see it
    eventually(lambda: simulator.states("batch") == ["Running", "Succeeded"], timeout=10)


def test_crashloop_plan_restarts_up_to_max_crashes(pod_simulator: Simulator, k8s: Clients,
                                                   namespace: str) -> None:
    simulator = pod_simulator(plan=PodPlan(outcome="crashloop", crash_every=0.1,
                                           max_crashes=3, exit_code=2))
    k8s.core.create_namespaced_pod(namespace, pod_body("flaky"))

    def restarts() -> int:
        statuses = k8s.core.read_namespaced_pod("flaky", namespace).status.container_statuses
        return statuses[0].restart_count if statuses else 0

    eventually(lambda: restarts() == 3, timeout=10)
    consistently(lambda: restarts() == 3, duration=0.4)  # max_crashes is a ceiling
    assert simulator.states("flaky") == ["Running"] + ["CrashLoopBackOff"] * 3
    status = k8s.core.read_namespaced_pod("flaky", namespace).status.container_statuses[0]
    assert status.state.waiting.reason == "CrashLoopBackOff"
    assert status.last_state.terminated.exit_code == 2


def test_pod_ips_are_distinct(pod_simulator: Simulator, k8s: Clients, namespace: str) -> None:
    pod_simulator(selector="app=many")
    names = [f"many-{i}" for i in range(6)]
    for name in names:
        k8s.core.create_namespaced_pod(namespace, pod_body(name, {"app": "many"}))

    def ips() -> list[str] | None:
        pods = k8s.core.list_namespaced_pod(namespace, label_selector="app=many").items
        found = [p.status.pod_ip for p in pods if p.status.pod_ip]
        return found if len(found) == len(names) else None

    addresses = eventually(ips, timeout=10)
    assert len(set(addresses)) == len(names)
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("10.244.0.0/16")
               for a in addresses)


def test_pods_in_other_namespaces_are_left_alone(pod_simulator: Simulator, k8s: Clients,
                                                namespace: str, envtest: Any) -> None:
    from envtest import create_namespace, delete_namespace, namespace_name

    other = namespace_name("podsim-other")
    create_namespace(k8s.api_client, other)
    try:
        pod_simulator()  # every Pod, but only in the test namespace
        k8s.core.create_namespaced_pod(other, pod_body("elsewhere"))
        k8s.core.create_namespaced_pod(namespace, pod_body("here"))
        eventually(lambda: phase(k8s, namespace, "here") == "Running", timeout=10)
        consistently(lambda: phase(k8s, other, "elsewhere") == "Pending", duration=0.3)
    finally:
        delete_namespace(k8s.api_client, other)


def test_simulator_stops_at_once(k8s: Clients, namespace: str) -> None:
    with PodSimulator(k8s.api_client, namespace=namespace) as simulator:
        k8s.core.create_namespaced_pod(namespace, pod_body("before"))
        eventually(lambda: simulator.states("before") == ["Running", "Ready"], timeout=10)
        threads = list(simulator._threads)
        stopping = time.monotonic()
    # The open watch is interrupted, not left to run out its server-side timeout.
    assert time.monotonic() - stopping < 1.0
    assert threads and not any(t.is_alive() for t in threads)
    assert simulator.errors == []
    k8s.core.create_namespaced_pod(namespace, pod_body("after"))
    consistently(lambda: phase(k8s, namespace, "after") == "Pending", duration=0.3)


def test_on_transition_reports_each_transition_as_it_happens(k8s, namespace) -> None:
    seen: list[str] = []
    simulator = PodSimulator(k8s.api_client, namespace=namespace, selector="live=yes",
                             plan=PodPlan(ready_after=0.2),
                             on_transition=lambda t: seen.append(f"{t.pod}:{t.state}"))
    with simulator:
        k8s.core.create_namespaced_pod(namespace, {
            "metadata": {"name": "watched", "labels": {"live": "yes"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        eventually(lambda: seen == ["watched:Running", "watched:Ready"], timeout=10)
    assert [f"{t.pod}:{t.state}" for t in simulator.transitions] == seen
