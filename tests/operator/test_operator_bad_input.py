"""RayClusters the schema accepts but that cannot work: a clear status and one Warning Event,
no Pods, and no crash loop (status writes and events stay bounded however often it reconciles);
a corrected spec then reconciles normally."""

from __future__ import annotations

from typing import Any

import pytest

from envtest import MERGE_PATCH, consistently, eventually, request

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"
CONTAINER = {"name": "ray", "image": "rayproject/ray:2.9.0"}


def cluster(name: str, head_containers: list[dict[str, Any]], min_replicas: int,
            max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster", "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": head_containers}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1,
                                  "minReplicas": min_replicas, "maxReplicas": max_replicas,
                                  "template": {"spec": {"containers": [CONTAINER]}}}],
        },
    }


def cases() -> dict[str, tuple[dict[str, Any], str, dict[str, Any]]]:
    """(manifest, problem, fix) per case; fresh dicts on each call, because ``apply`` writes
    the namespace into the manifest it is given."""
    return {
        "min-above-max": (
            cluster("min-above-max", [CONTAINER], min_replicas=3, max_replicas=1),
            "workerGroupSpecs[0] (workers): minReplicas 3 is greater than maxReplicas 1",
            {"spec": {"workerGroupSpecs": [{"groupName": "workers", "replicas": 1,
                                            "minReplicas": 0, "maxReplicas": 1,
                                            "template": {"spec": {"containers": [CONTAINER]}}}
                                           ]}},
        ),
        "no-head-container": (
            cluster("no-head-container", [], min_replicas=0, max_replicas=1),
            "headGroupSpec: the Pod template has no container",
            {"spec": {"headGroupSpec": {"template": {"spec": {"containers": [CONTAINER]}}}}},
        ),
    }


def warnings_about(k8s: Any, namespace: str, name: str) -> list[Any]:
    return [e for e in k8s.core.list_namespaced_event(namespace).items
            if e.involved_object.name == name and e.type == "Warning"]


@pytest.mark.parametrize("case", sorted(cases()))
def test_invalid_spec_gets_failed_status_and_one_warning_without_crash_loop(
        case, ray_operator, apply, k8s, namespace, wait_for, api_calls):
    manifest, problem, fix = cases()[case]
    # Reconcile every 0.2 s: a controller that re-reports on each pass would show at once.
    op = ray_operator(controllers=("raycluster",), default_requeue_seconds=0.2)
    apply(manifest)

    status = wait_for("RayCluster", case,
                      lambda o: (o.get("status") or {}).get("state") == "failed")["status"]
    assert status["reason"] == f"invalid spec: {problem}"

    def retried() -> int:
        """Faults injected (under --envtest-explore or --envtest-fault; 0 in a plain run):
        each makes the operator reconcile once more, and that reconcile may warn again (a
        retried status write, a fresh instance after a crash: events are sent at least once)."""
        return api_calls.count(user=op.user, injected=True)

    found = eventually(lambda: warnings_about(k8s, namespace, case), timeout=10)
    assert 1 <= len(found) <= 1 + op.restarts, found
    warning = found[0]
    assert warning.reason == "InvalidRayClusterSpec"
    assert problem in warning.message
    assert warning.involved_object.kind == "RayCluster"
    assert problem in op.logs()

    def writes(**filters: Any) -> int:
        return api_calls.count(user=op.user, namespace=namespace, **filters)

    # More events on the object (annotation edits) on top of the fast requeue.
    for i in range(3):
        k8s.custom.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, case,
            {"metadata": {"annotations": {"poked": str(i)}}})

    def bounded() -> bool:
        events = warnings_about(k8s, namespace, case)
        return (writes(resource=PLURAL, subresource="status", faulted=False) == 1
                and writes(resource="events", injected=False) <= 1 + retried()
                and len(events) <= 1 + op.restarts
                and sum(e.count or 1 for e in events) <= 1 + retried()
                and writes(resource="pods") == 0)

    consistently(bounded, duration=2.0, interval=0.25,
                 message=f"crash loop on an invalid spec: {api_calls.summary(user=op.user)}")
    op.running.check()  # still running, nothing raised

    # A corrected spec is picked up: Pods are made and the failure is cleared from status.
    request(k8s.api_client, "PATCH",
            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{case}", body=fix,
            content_type=MERGE_PATCH)
    fixed = wait_for("RayCluster", case,
                     lambda o: (o.get("status") or {}).get("state") != "failed")["status"]
    assert "reason" not in fixed
    eventually(lambda: writes(resource="pods", verb="create", faulted=False) == 2, timeout=10)
