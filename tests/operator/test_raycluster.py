"""The RayCluster controller on a real control plane: Pods, Services, scaling, readiness, status.

Every test runs the operator (thread mode unless said otherwise) as its own least-privilege user
in the test's namespace; Pods are moved by the kubelet stand-ins (``pods``, ``pod_simulator``).
"""

from __future__ import annotations

from typing import Any

from envtest import MERGE_PATCH, PodPlan, consistently, eventually, pod_is_ready, request

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"
CLUSTER_LABELS = ("ray.io/cluster", "ray.io/node-type", "ray.io/group", "ray.io/identifier",
                  "ray.io/is-ray-node")


def worker_group(name: str = "small-group", replicas: int | None = 1, min_replicas: int = 0,
                 max_replicas: int = 5, workers_to_delete: list[str] | None = None
                 ) -> dict[str, Any]:
    group: dict[str, Any] = {
        "groupName": name, "minReplicas": min_replicas, "maxReplicas": max_replicas,
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker",
                                              "image": "rayproject/ray:2.9.0"}]}},
    }
    if replicas is not None:
        group["replicas"] = replicas
    if workers_to_delete is not None:
        group["scaleStrategy"] = {"workersToDelete": workers_to_delete}
    return group


def raycluster(name: str, *groups: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "rayVersion": "2.9.0",
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": "rayproject/ray:2.9.0",
                    "ports": [{"name": "gcs-server", "containerPort": 6379},
                              {"name": "dashboard", "containerPort": 8365},
                              {"name": "client", "containerPort": 10001}],
                }]}},
            },
            "workerGroupSpecs": list(groups),
        },
    }


def cluster_pods(k8s: Any, namespace: str, cluster: str,
                 node_type: str | None = None) -> list[dict[str, Any]]:
    """The cluster's Pods that are not being deleted, oldest first."""
    selector = f"ray.io/cluster={cluster}" + (f",ray.io/node-type={node_type}" if node_type
                                              else "")
    items = request(k8s.api_client, "GET", f"/api/v1/namespaces/{namespace}/pods",
                    query={"labelSelector": selector})["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    return sorted(live, key=lambda p: (p["metadata"]["creationTimestamp"],
                                       p["metadata"]["name"]))


def names(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


def get_cluster(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    return k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def status_of(k8s: Any, namespace: str, name: str) -> dict[str, Any]:
    return get_cluster(k8s, namespace, name).get("status") or {}


def wait_for_pods(k8s: Any, namespace: str, cluster: str, workers: int,
                  timeout: float = 10.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(head Pod, worker Pods) once there is one head and exactly ``workers`` workers."""
    def counted() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        heads = cluster_pods(k8s, namespace, cluster, "head")
        found = cluster_pods(k8s, namespace, cluster, "worker")
        if len(heads) == 1 and len(found) == workers:
            return heads[0], found
        return None

    return eventually(counted, timeout=timeout,
                      message=f"RayCluster {cluster}: 1 head and {workers} worker Pods")


def state_is(state: str) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return (obj.get("status") or {}).get("state") == state

    check.__name__ = f"state == {state!r}"
    return check


def test_pods_and_head_service_carry_kuberay_labels_and_controller_owner_references(
        ray_operator, apply, k8s, namespace):
    ray_operator(controllers=("raycluster",))
    created = apply(raycluster("labels", worker_group(replicas=2)))[0]
    uid = created["metadata"]["uid"]
    head, workers = wait_for_pods(k8s, namespace, "labels", workers=2)

    assert head["metadata"]["generateName"] == "labels-head-"
    assert {k: head["metadata"]["labels"][k] for k in CLUSTER_LABELS} == {
        "ray.io/cluster": "labels", "ray.io/node-type": "head", "ray.io/group": "headgroup",
        "ray.io/identifier": "labels-head", "ray.io/is-ray-node": "yes"}
    for worker in workers:
        assert worker["metadata"]["generateName"] == "labels-worker-small-group-"
        assert {k: worker["metadata"]["labels"][k] for k in CLUSTER_LABELS} == {
            "ray.io/cluster": "labels", "ray.io/node-type": "worker",
            "ray.io/group": "small-group", "ray.io/identifier": "labels-worker",
            "ray.io/is-ray-node": "yes"}
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "labels", "uid": uid,
             "controller": True, "blockOwnerDeletion": True}
    for pod in (head, *workers):
        assert pod["metadata"]["ownerReferences"] == [owner], pod["metadata"]["name"]

    service = eventually(lambda: request(k8s.api_client, "GET",
                                         f"/api/v1/namespaces/{namespace}/services/"
                                         "labels-head-svc"), timeout=10)
    assert service["metadata"]["ownerReferences"] == [owner]
    assert service["metadata"]["labels"]["ray.io/cluster"] == "labels"
    assert service["metadata"]["labels"]["ray.io/node-type"] == "head"
    assert service["spec"]["selector"] == {"ray.io/cluster": "labels",
                                           "ray.io/node-type": "head"}
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    # The head container's own ports, completed with KubeRay's defaults.
    assert ports == {"client": 10001, "dashboard": 8365, "gcs-server": 6379, "metrics": 8080,
                     "serve": 8000}


def test_scaling_up_and_down_is_clamped_to_min_and_max(ray_operator, apply, k8s, namespace):
    ray_operator(controllers=("raycluster",))
    apply(raycluster("scale", worker_group(replicas=1, min_replicas=1, max_replicas=3)))
    wait_for_pods(k8s, namespace, "scale", workers=1)

    # 5 wanted, at most 3 allowed: exactly 3, and no more later.
    apply(raycluster("scale", worker_group(replicas=5, min_replicas=1, max_replicas=3)))
    _, three = wait_for_pods(k8s, namespace, "scale", workers=3)
    consistently(lambda: len(cluster_pods(k8s, namespace, "scale", "worker")) == 3,
                 duration=1.0, interval=0.1, message="replicas above maxReplicas")
    status = eventually(lambda: (s := status_of(k8s, namespace, "scale"))
                        .get("desiredWorkerReplicas") == 3 and s, timeout=10)
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (1, 3)

    # 0 wanted, at least 1 required: down to exactly one of the three.
    apply(raycluster("scale", worker_group(replicas=0, min_replicas=1, max_replicas=3)))
    _, one = wait_for_pods(k8s, namespace, "scale", workers=1)
    consistently(lambda: len(cluster_pods(k8s, namespace, "scale", "worker")) == 1,
                 duration=1.0, interval=0.1, message="replicas below minReplicas")
    assert names(one) <= names(three), "scaling down must delete Pods, not replace them"
    eventually(lambda: status_of(k8s, namespace, "scale").get("desiredWorkerReplicas") == 1,
               timeout=10)


def test_workers_to_delete_removes_exactly_the_listed_pods(ray_operator, apply, k8s, namespace,
                                                           api_calls, pods, wait_for):
    op = ray_operator(controllers=("raycluster",))
    apply(raycluster("wtd", worker_group(replicas=3, max_replicas=5)))
    _, workers = wait_for_pods(k8s, namespace, "wtd", workers=3)
    running, pending, survivor = (w["metadata"]["name"] for w in workers)
    pods.set_running(running)
    wait_for("RayCluster", "wtd",
             lambda o: (o.get("status") or {}).get("availableWorkerReplicas") == 1)
    # Left to itself, scaling 3 -> 1 keeps the Running worker and deletes the Pending ones;
    # the list names the Running one, so only following it removes that Pod.
    victims = {running, pending}
    mark = api_calls.mark()

    apply(raycluster("wtd", worker_group(replicas=1, max_replicas=5,
                                         workers_to_delete=sorted(victims))))
    _, left = wait_for_pods(k8s, namespace, "wtd", workers=1)
    assert names(left) == {survivor}
    consistently(lambda: names(cluster_pods(k8s, namespace, "wtd", "worker")) == {survivor},
                 duration=1.0, interval=0.1)
    # As if there had been no fault (exploration's 500 on a delete adds its retry).
    deleted = api_calls.calls(user=op.user, verb="delete", resource="pods", since=mark,
                              faulted=False)
    assert sorted(c.name for c in deleted) == sorted(victims), api_calls.summary(user=op.user)
    assert not api_calls.calls(user=op.user, verb="create", resource="pods", since=mark,
                               faulted=False), \
        "nothing to replace: the listed Pods were exactly the ones to remove"


def test_state_is_ready_only_once_every_pod_is_running_and_ready(ray_operator, apply, k8s,
                                                                 namespace, pods, wait_for):
    ray_operator(controllers=("raycluster",))
    apply(raycluster("ready", worker_group(replicas=2)))
    head, (first, second) = wait_for_pods(k8s, namespace, "ready", workers=2)
    pods.set_running(head["metadata"]["name"])
    pods.set_running(first["metadata"]["name"])

    # One worker still Pending: the operator has seen the others (1 worker available) ...
    wait_for("RayCluster", "ready",
             lambda o: (o.get("status") or {}).get("availableWorkerReplicas") == 1)
    not_ready = lambda: status_of(k8s, namespace, "ready").get("state") != "ready"  # noqa: E731
    # ... and still does not call the cluster ready.
    consistently(not_ready, duration=1.0, interval=0.1, message="ready with a Pending Pod")

    # Running but not Ready: counted as available, still not ready.
    pods.set_running(second["metadata"]["name"], ready=False)
    wait_for("RayCluster", "ready",
             lambda o: (o.get("status") or {}).get("availableWorkerReplicas") == 2)
    consistently(not_ready, duration=1.0, interval=0.1,
                 message="ready with a Running but not Ready Pod")

    pods.set_ready(second["metadata"]["name"])
    wait_for("RayCluster", "ready", state_is("ready"))
    assert all(pod_is_ready(p) for p in cluster_pods(k8s, namespace, "ready"))

    # A Pod that stops being Ready makes a ready cluster unhealthy.
    pods.set_not_ready(first["metadata"]["name"])
    wait_for("RayCluster", "ready", state_is("unhealthy"))


def test_state_follows_the_pod_simulator_and_is_never_ready_early(ray_operator, apply, k8s,
                                                                  namespace, pod_simulator):
    ray_operator(controllers=("raycluster",))
    # Running at once, Ready only 1.5 s later: a long window in which "ready" would be wrong.
    simulator = pod_simulator(selector="ray.io/cluster=sim",
                              plan=PodPlan(running_after=0.0, ready_after=1.5))
    apply(raycluster("sim", worker_group(replicas=2)))
    seen_not_ready_with_all_running = False

    def ready_and_justified() -> bool:
        nonlocal seen_not_ready_with_all_running
        status = status_of(k8s, namespace, "sim")
        if status.get("state") != "ready":
            if status.get("availableWorkerReplicas") == 2:
                seen_not_ready_with_all_running = True
            return False
        # Pods only move forward under this plan: what is true now was true when it was written.
        live = cluster_pods(k8s, namespace, "sim")
        assert len(live) == 3 and all(pod_is_ready(p) for p in live), \
            f"state ready while Pods were not all Ready: {[p['status'] for p in live]}"
        return True

    eventually(ready_and_justified, timeout=15, interval=0.05)
    assert seen_not_ready_with_all_running, \
        "the operator never showed the Running-but-not-Ready window as not ready"
    ready_moves = [t for t in simulator.transitions if t.state == "Ready"]
    assert len(ready_moves) == 3, simulator.transitions
    assert not simulator.errors, simulator.errors


def test_status_counts_endpoints_and_head_addresses(ray_operator, apply, k8s, namespace, pods,
                                                    wait_for):
    ray_operator(controllers=("raycluster",))
    apply(raycluster("counts", worker_group("cpu", replicas=2, min_replicas=1, max_replicas=4),
                     worker_group("gpu", replicas=None, min_replicas=1, max_replicas=2)))
    head, workers = wait_for_pods(k8s, namespace, "counts", workers=3)
    pods.set_running(head["metadata"]["name"], pod_ip="10.77.0.5")
    for worker in workers[:2]:
        pods.set_running(worker["metadata"]["name"])

    status = wait_for("RayCluster", "counts",
                      lambda o: (o.get("status") or {}).get("availableWorkerReplicas") == 2
                      and o["status"].get("head", {}).get("podIP"))["status"]
    assert status["desiredWorkerReplicas"] == 3  # cpu 2 + gpu defaulting to its minReplicas 1
    assert status["minWorkerReplicas"] == 2
    assert status["maxWorkerReplicas"] == 6
    assert status["endpoints"] == {"client": "10001", "dashboard": "8365", "gcs-server": "6379",
                                   "metrics": "8080", "serve": "8000"}
    service = request(k8s.api_client, "GET",
                      f"/api/v1/namespaces/{namespace}/services/counts-head-svc")
    assert service["spec"]["clusterIP"], "the apiserver allocates a ClusterIP"
    assert status["head"] == {"podIP": "10.77.0.5", "serviceIP": service["spec"]["clusterIP"]}
    assert status.get("state") != "ready"
    assert status["observedGeneration"] == get_cluster(k8s, namespace, "counts")[
        "metadata"]["generation"]

    pods.set_running(workers[2]["metadata"]["name"])
    ready = wait_for("RayCluster", "counts", state_is("ready"))["status"]
    assert ready["availableWorkerReplicas"] == 3


def test_no_status_write_when_nothing_changed(ray_operator, apply, k8s, namespace, pods,
                                              wait_for, api_calls):
    # Reconcile every 0.2 s instead of 300 s: many chances to write for nothing.
    op = ray_operator(controllers=("raycluster",), default_requeue_seconds=0.2)
    apply(raycluster("quiet", worker_group(replicas=1)))
    head, (worker,) = wait_for_pods(k8s, namespace, "quiet", workers=1)
    for pod in (head, worker):
        pods.set_running(pod["metadata"]["name"])
    wait_for("RayCluster", "quiet", state_is("ready"))

    def status_writes(**since: Any) -> int:
        # faulted=False: as without faults (under --envtest-explore or --envtest-fault, the
        # injected refusals and the repeat of a write a crash cut off are left out).
        return api_calls.count(user=op.user, verb=["update", "patch"], resource=PLURAL,
                               subresource="status", namespace=namespace, faulted=False,
                               **since)

    # Pods created, the head Running, the worker Running and ready: a handful of writes.
    assert 1 <= status_writes() <= 4, api_calls.summary(user=op.user)
    mark = api_calls.mark()
    # Events on owned Pods wake the controller too; none of them changes the status.
    for i in range(3):
        request(k8s.api_client, "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{worker['metadata']['name']}",
                body={"metadata": {"annotations": {"touched": str(i)}}},
                content_type=MERGE_PATCH)
    consistently(lambda: status_writes(since=mark) == 0, duration=2.5, interval=0.25,
                 message="status written although nothing changed")

    # The operator was reconciling all along: a real change is written at once.
    pods.set_not_ready(worker["metadata"]["name"])
    wait_for("RayCluster", "quiet", state_is("unhealthy"))
    assert status_writes(since=mark) == 1, api_calls.summary(user=op.user, since=mark)


def test_operator_as_a_separate_process(ray_operator, apply, k8s, namespace, pods, wait_for,
                                        api_calls):
    op = ray_operator(mode="process")
    apply(raycluster("proc", worker_group(replicas=1)))
    head, (worker,) = wait_for_pods(k8s, namespace, "proc", workers=1, timeout=30)
    for pod in (head, worker):
        pods.set_running(pod["metadata"]["name"])
    status = wait_for("RayCluster", "proc", state_is("ready"), timeout=15)["status"]
    assert status["availableWorkerReplicas"] == 1

    created = api_calls.calls(user=op.user, verb="create", resource="pods")
    assert len(created) == 2 and all(c.succeeded for c in created), api_calls.summary()
    assert op.operator is None  # nothing of it lives in this process
    assert "caches synced" in op.logs()
