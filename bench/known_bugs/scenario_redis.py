"""Acto's workloads for OT-CONTAINER-KIT's Redis operator (OT-CONTAINER-KIT/redis-operator), as
tests.

Run by ``bench/bench_known_bugs.py`` with ``REDIS_SOURCE`` (the operator's source at a
release, for its CRD) and ``REDIS_BINARY`` (its main built from it); named so that no test
run of the repository collects it.  A standalone Redis is a StatefulSet and two Services the
operator makes (through a client of its own, from ``KUBECONFIG``) and checks again every
10 s; nothing runs its Pods here (no container is needed to see these bugs: the operator
dies on the spec before it writes).  It watches every namespace, so each trial of operation
exploration has namespaces of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from envtest import eventually

SOURCE = Path(os.environ["REDIS_SOURCE"])
BINARY = os.environ["REDIS_BINARY"]
GROUP, VERSION, PLURAL = "redis.redis.opstreelabs.in", "v1beta1", "redis"
NAME = "redis-standalone"

def crds() -> list[dict[str, Any]]:
    """Its CRDs, a Redis and a RedisCluster (its manager waits for both kinds' caches and
    exits after two minutes without one).  v0.10.0's RedisCluster CRD is not valid YAML
    (fixed by v0.11.0): there, one with its names and an open schema stands in."""
    bases = SOURCE / "config/crd/bases"
    found = [yaml.safe_load((bases / "redis.redis.opstreelabs.in_redis.yaml").read_text())]
    try:
        found.append(yaml.safe_load(
            (bases / "redis.redis.opstreelabs.in_redisclusters.yaml").read_text()))
    except yaml.YAMLError:
        found.append({"apiVersion": "apiextensions.k8s.io/v1",
                      "kind": "CustomResourceDefinition",
                      "metadata": {"name": f"redisclusters.{GROUP}"},
                      "spec": {"group": GROUP, "scope": "Namespaced", "names": {
                          "kind": "RedisCluster", "listKind": "RedisClusterList",
                          "plural": "redisclusters", "singular": "rediscluster"},
                          "versions": [{"name": VERSION, "served": True, "storage": True,
                                        "subresources": {"status": {}},
                                        "schema": {"openAPIV3Schema": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}})
    return found


pytestmark = pytest.mark.envtest_crds(*crds())


def start(run_operator: Any) -> Any:
    return run_operator([BINARY, "--metrics-bind-address=0", "--health-probe-bind-address=0"],
                        name="redis-operator")


#: Its volume (these releases dereference the storage's settings unchecked: a Redis without
#: ``storage`` stops them too, at any release of 2022; nothing makes the claim here).
STORAGE = {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                            "resources": {"requests": {"storage": "1Gi"}}}}}


def standalone(kubernetes_config: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Redis", "metadata": {"name": NAME},
            "spec": {"kubernetesConfig": {"image": "quay.io/opstree/redis:v6.2.5",
                                          "imagePullPolicy": "IfNotPresent",
                                          **kubernetes_config},
                     "storage": STORAGE}}


def made(k8s: Any, namespace: str) -> Any:
    """The StatefulSet and the Service the operator makes (``None`` until both are there)."""
    try:
        k8s.core.read_namespaced_service(NAME, namespace)
        return k8s.apps.read_namespaced_stateful_set(NAME, namespace)
    except Exception:
        return None


#: What the Redis container asks for (the operator copies it into the StatefulSet).
RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"},
             "limits": {"cpu": "100m", "memory": "128Mi"}}


@pytest.mark.envtest_explore("operations", fields=["spec.kubernetesConfig.resources"])
def test_resources(run_operator: Any, apply: Any, k8s: Any, namespace: str) -> None:
    """Acto's operations on the Redis container's resources (redis-operator#283, fixed by
    #294): a standalone Redis with requests and limits, operations then change or remove
    them."""
    start(run_operator)
    apply(standalone({"resources": RESOURCES}))
    eventually(lambda: made(k8s, namespace), timeout=60)


#: The password's Secret, named by key (the Redis container reads it from there).
SECRET = {"name": "redis-secret", "key": "password"}


@pytest.mark.envtest_explore("operations", fields=["spec.kubernetesConfig.redisSecret"])
def test_password_secret(run_operator: Any, apply: Any, k8s: Any, namespace: str) -> None:
    """Acto's operations on the password's Secret (redis-operator#286, fixed by #293): a
    standalone Redis whose password is in a Secret, operations then change or remove its
    name and key."""
    start(run_operator)
    apply(standalone({"resources": RESOURCES, "redisSecret": SECRET}))
    eventually(lambda: made(k8s, namespace), timeout=60)
