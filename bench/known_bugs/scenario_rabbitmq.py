"""Sieve's workloads for RabbitMQ's cluster operator, as tests of this framework.

Run by ``bench/bench_known_bugs.py`` with ``RMQ_SOURCE`` (the operator's module source, for
its CRD) and ``RMQ_BINARY`` (the operator built from it); named so that no test run of the
repository collects it.  The cluster profile runs the Pods (the StatefulSet controller, the
scheduler, the simulated Nodes); the PersistentVolume binder and the claims' protection
bind each claim to a volume made here, of a StorageClass that may expand; every exec the
operator runs in a Pod (``rabbitmqctl``, ``rabbitmq-plugins``) is answered as done.  The
operator runs as it is released, with leader election (its lease 3 s, so that a restarted
instance leads again soon).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scenario_support import local_volumes

from envtest import WaitTimeoutError, eventually

SOURCE = Path(os.environ["RMQ_SOURCE"])
BINARY = os.environ["RMQ_BINARY"]
CRD = str(SOURCE / "config/crd/bases/rabbitmq.com_rabbitmqclusters.yaml")
GROUP, VERSION, PLURAL = "rabbitmq.com", "v1beta1", "rabbitmqclusters"
NAME = "rabbitmq-cluster"
#: The metrics flag was renamed between releases; 0 binds nothing.
METRICS_FLAG = ("--metrics-addr=0" if '"metrics-addr"' in (SOURCE / "main.go").read_text()
                else "--metrics-bind-address=0")

pytestmark = [pytest.mark.envtest_profile("cluster"),
              pytest.mark.envtest_controllers("persistentvolume-binder", "pvc-protection",
                                              "pv-protection"),
              pytest.mark.envtest_crds(CRD)]


def start(run_operator: Any, namespace: str, kubelet: Any) -> Any:
    kubelet.plan("app.kubernetes.io/component=rabbitmq", exec_handler=lambda request: "")
    return run_operator([BINARY, METRICS_FLAG], name="rabbitmq-operator", env={
        "OPERATOR_NAMESPACE": namespace, "OPERATOR_SCOPE_NAMESPACE": namespace,
        "KUBE_CONFIG": "{kubeconfig}", "LEASE_DURATION": "3", "RENEW_DEADLINE": "2",
        "RETRY_PERIOD": "1"})


@pytest.fixture
def volumes(k8s: Any, namespace: str) -> Iterator[str]:
    """A StorageClass that may expand, and volumes for the claims to bind to."""
    yield from local_volumes(k8s, namespace, expandable=True)


def cluster(storage_class: str, storage: str = "10Gi", replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RabbitmqCluster",
            "metadata": {"name": NAME},
            "spec": {"replicas": replicas,
                     "persistence": {"storage": storage, "storageClassName": storage_class}}}


def pod_ready(k8s: Any, namespace: str, name: str) -> bool:
    try:
        pod = k8s.core.read_namespaced_pod(name, namespace)
    except Exception:
        return False
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def pod_gone(k8s: Any, namespace: str, name: str) -> bool:
    try:
        k8s.core.read_namespaced_pod(name, namespace)
    except Exception:
        return True
    return False


def claim_size(k8s: Any, namespace: str) -> str:
    claim = k8s.core.read_namespaced_persistent_volume_claim(
        f"persistence-{NAME}-server-0", namespace)
    return str(claim.spec.resources.requests["storage"])


def refused_scale_down(k8s: Any, namespace: str) -> bool:
    """The cluster says it refused to scale down (its ReconcileSuccess condition: its
    Events of it are dropped by client-go's spam filter after the first few)."""
    found = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
    return any(c.get("type") == "ReconcileSuccess" and c.get("status") == "False"
               and c.get("reason") == "UnsupportedOperation"
               for c in (found.get("status") or {}).get("conditions") or [])


def patch(k8s: Any, namespace: str, spec: dict[str, Any]) -> None:
    k8s.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME,
                                              {"spec": spec})


def test_recreate(run_operator: Any, apply: Any, k8s: Any, namespace: str, volumes: str,
                  kubelet: Any) -> None:
    """Sieve's "recreate": a cluster made, deleted, made again (rabbitmq#648)."""
    start(run_operator, namespace, kubelet)
    apply(cluster(volumes))
    eventually(lambda: pod_ready(k8s, namespace, f"{NAME}-server-0"), timeout=60)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
    eventually(lambda: pod_gone(k8s, namespace, f"{NAME}-server-0"), timeout=60)
    apply(cluster(volumes))
    eventually(lambda: pod_ready(k8s, namespace, f"{NAME}-server-0"), timeout=60)


def test_resize_pvc(run_operator: Any, apply: Any, k8s: Any, namespace: str, volumes: str,
                    kubelet: Any) -> None:
    """Sieve's "resize-pvc": 10Gi, then 15Gi; the claim must grow (rabbitmq#782, #653)."""
    start(run_operator, namespace, kubelet)
    apply(cluster(volumes))
    eventually(lambda: pod_ready(k8s, namespace, f"{NAME}-server-0"), timeout=60)
    patch(k8s, namespace, {"persistence": {"storage": "15Gi"}})
    eventually(lambda: claim_size(k8s, namespace) == "15Gi", timeout=30)
    eventually(lambda: pod_ready(k8s, namespace, f"{NAME}-server-0"), timeout=60)


def sts_replicas(k8s: Any, namespace: str) -> int:
    return int(k8s.apps.read_namespaced_stateful_set(f"{NAME}-server", namespace).spec.replicas)


def test_scaleup_scaledown(run_operator: Any, apply: Any, k8s: Any, namespace: str,
                           volumes: str, kubelet: Any) -> None:
    """Sieve's "scaleup-scaledown": 1 replica, 3, then 2 (rabbitmq#758); scaling down is
    refused, so three remain.  As in Sieve's workload, the scale-down follows the scale-up
    without waiting for its Pods: the operator is given up to 5 s to act on it (the
    StatefulSet scaled to 3) and the workload goes on either way, so an operator that never
    saw the 3 is not waited for."""
    start(run_operator, namespace, kubelet)
    apply(cluster(volumes))
    eventually(lambda: pod_ready(k8s, namespace, f"{NAME}-server-0"), timeout=60)
    patch(k8s, namespace, {"replicas": 3})
    try:
        eventually(lambda: sts_replicas(k8s, namespace) == 3, timeout=5)
    except WaitTimeoutError:
        pass  # the workload's timing, not its check: the end state says what happened
    patch(k8s, namespace, {"replicas": 2})
    eventually(lambda: refused_scale_down(k8s, namespace), timeout=30)
    assert sts_replicas(k8s, namespace) == 3
