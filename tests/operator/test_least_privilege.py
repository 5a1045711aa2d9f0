"""Least privilege (issue 9): the operator runs under the ClusterRole it ships, and a ClusterRole
missing one verb it needs is caught, with the apiserver's own forbidden message in the operator's
logs and in the test's diagnostics (the audited calls show the 403 for the operator's user)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from envtest import eventually

RBAC = Path(__file__).resolve().parents[2] / "operator" / "config" / "rbac" / "role.yaml"
ROLE = yaml.safe_load(RBAC.read_text())
CONTAINER = {"name": "ray", "image": "rayproject/ray:2.9.0"}


def raycluster() -> dict[str, Any]:
    """A fresh dict each time: ``apply`` writes the namespace into the manifest it is given."""
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rbac"},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [CONTAINER]}}},
            "workerGroupSpecs": [{"groupName": "g", "replicas": 1, "minReplicas": 0,
                                  "maxReplicas": 2,
                                  "template": {"spec": {"containers": [CONTAINER]}}}],
        },
    }


def role_without(resource: str, verb: str, name: str) -> dict[str, Any]:
    """A copy of the shipped ClusterRole, renamed (the original is shared by other tests),
    with ``verb`` taken away on ``resource``."""
    role = copy.deepcopy(ROLE)
    role["metadata"]["name"] = name
    removed = 0
    for rule in role["rules"]:
        if resource in rule["resources"] and verb in rule["verbs"]:
            rule["verbs"].remove(verb)
            removed += 1
    assert removed == 1, f"the shipped role grants {verb} on {resource} exactly once"
    return role


def test_the_shipped_cluster_role_is_enough(ray_operator, apply, k8s, namespace, pods,
                                            wait_for, api_calls):
    op = ray_operator()  # bound to operator/config/rbac/role.yaml only (no system:masters)
    assert op.running.user.groups == ()
    apply(raycluster())
    names = eventually(lambda: len(items := k8s.core.list_namespaced_pod(
        namespace, label_selector="ray.io/cluster=rbac").items) == 2 and items, timeout=10)
    for pod in names:
        pods.set_running(pod.metadata.name)
    wait_for("RayCluster", "rbac", lambda o: (o.get("status") or {}).get("state") == "ready")
    calls = api_calls.calls(user=op.user)
    assert {c.target for c in calls if c.succeeded} >= {"pods", "services",
                                                       "rayclusters/status", "events"}
    assert not [str(c) for c in calls if c.code == 403]


def test_a_missing_verb_is_caught_with_the_forbidden_message(envtest_diagnostics, ray_operator,
                                                             apply, namespace, api_calls):
    role = role_without("pods", "create",
                        f"ray-operator-no-pod-create-{namespace}"[:63].rstrip("-"))
    op = ray_operator(name="ray-operator-no-pod-create", cluster_roles=role)
    apply(raycluster())

    forbidden = (f'pods is forbidden: User "{op.user}" cannot create resource "pods" in API '
                 f'group "" in the namespace "{namespace}"')
    eventually(lambda: forbidden in op.logs(), timeout=10,
               message="the operator never logged the apiserver's forbidden message")
    denied = eventually(lambda: api_calls.calls(user=op.user, verb="create", resource="pods",
                                                namespace=namespace), timeout=10)
    assert {c.code for c in denied} == {403}
    # Everything else it needs still works: the head Service was created.
    assert api_calls.count(user=op.user, verb="create", resource="services",
                           succeeded=True) == 1

    # What a failing test's report would show (the plugin's own diagnostics).
    sections = envtest_diagnostics()
    assert forbidden in sections["ray-operator-no-pod-create logs"]
    table = sections["API calls during the test"]
    assert any(op.user in line and " create " in line and line.rstrip().endswith("403")
               and "pods" in line for line in table.splitlines()), table
