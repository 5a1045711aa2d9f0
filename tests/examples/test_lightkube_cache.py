"""An async lightkube operator under test, as a new user writes it: a Cache, its Deployment,
Service and settings, and a record in a namespace of the operator's own.

The operator (``lightkube_cache/cache_operator.py``) runs as a command, with its own
kubeconfig, on the cluster profile: kube-controller-manager makes the Deployment's Pods,
the simulated kubelet runs them, and the operator reports the ready replicas.  Its record
of each Cache lives in ``cache-records``, named after the Cache's namespace (fresh in every
run): exploration must read that name as the same object in every run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from envtest import eventually

HERE = Path(__file__).parent / "lightkube_cache"
GROUP, VERSION, PLURAL = "cache.example.com", "v1", "caches"
RECORDS = "cache-records"

pytestmark = [pytest.mark.envtest_profile("cluster"),
              pytest.mark.envtest_crds(str(HERE / "crd.yaml"))]


def start(run_operator: Any) -> Any:
    return run_operator([sys.executable, str(HERE / "cache_operator.py"), "--kubeconfig",
                         "{kubeconfig}"], name="cache-operator")


def cache(name: str = "demo", size: int = 2, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Cache", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


def ready(k8s: Any, namespace: str, name: str, replicas: int) -> bool:
    found = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    status = found.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return status.get("readyReplicas") == replicas and conditions.get("Ready") == "True"


def record(k8s: Any, namespace: str, name: str = "demo") -> Any:
    return k8s.core.read_namespaced_config_map(f"{namespace}.{name}", RECORDS)


def gone(read: Any) -> bool:
    try:
        read()
    except Exception as error:
        return getattr(error, "status", None) == 404
    return False


def test_a_cache_gets_its_deployment_service_and_settings(run_operator, apply, k8s,
                                                         namespace):
    start(run_operator)
    made = apply(cache(ttl="30s"))[0]
    deployment = eventually(lambda: k8s.apps.read_namespaced_deployment("demo", namespace),
                            timeout=30)
    assert deployment.spec.replicas == 2
    assert deployment.metadata.owner_references[0].uid == made["metadata"]["uid"]
    service = eventually(lambda: k8s.core.read_namespaced_service("demo", namespace),
                         timeout=30)
    assert service.spec.cluster_ip == "None"
    settings = eventually(lambda: k8s.core.read_namespaced_config_map("demo-config",
                                                                      namespace), timeout=30)
    assert settings.data == {"ttl": "30s", "size": "2"}
    assert eventually(lambda: record(k8s, namespace), timeout=30).data["size"] == "2"


def test_a_cache_is_ready_once_its_replicas_are(run_operator, apply, k8s, namespace):
    start(run_operator)
    apply(cache(size=3))
    eventually(lambda: ready(k8s, namespace, "demo", 3), timeout=60)


def test_its_record_is_named_after_its_namespace(run_operator, apply, k8s, namespace):
    start(run_operator)
    apply(cache())
    kept = eventually(lambda: record(k8s, namespace), timeout=30)
    assert kept.data == {"namespace": namespace, "cache": "demo", "size": "2"}


def test_resizing_changes_replicas_settings_and_record(run_operator, apply, k8s, namespace):
    start(run_operator)
    apply(cache(size=1))
    eventually(lambda: ready(k8s, namespace, "demo", 1), timeout=60)
    apply(cache(size=3))
    eventually(lambda: ready(k8s, namespace, "demo", 3), timeout=60)
    assert k8s.apps.read_namespaced_deployment("demo", namespace).spec.replicas == 3
    assert record(k8s, namespace).data["size"] == "3"
    assert k8s.core.read_namespaced_config_map("demo-config", namespace).data["size"] == "3"


def test_deleting_a_cache_deletes_its_record(run_operator, apply, k8s, namespace):
    start(run_operator)
    apply(cache())
    eventually(lambda: record(k8s, namespace), timeout=30)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")
    eventually(lambda: gone(lambda: record(k8s, namespace)), timeout=30)
    eventually(lambda: gone(lambda: k8s.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "demo")), timeout=30)


def test_two_caches_keep_two_records(run_operator, apply, k8s, namespace):
    start(run_operator)
    apply(cache("a", size=1))
    apply(cache("b", size=1))
    eventually(lambda: ready(k8s, namespace, "a", 1) and ready(k8s, namespace, "b", 1),
               timeout=60)
    assert record(k8s, namespace, "a").data["cache"] == "a"
    assert record(k8s, namespace, "b").data["cache"] == "b"
