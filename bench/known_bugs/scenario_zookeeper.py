"""Sieve's workloads for ZooKeeper's operator (pravega/zookeeper-operator), as tests.

Run by ``bench/bench_known_bugs.py`` with ``ZK_SOURCE`` (the operator's module source, for
its CRD) and ``ZK_BINARY`` (its ``cmd/manager`` built from it; from v0.2.14 on, the
operator's manager started by a main of the bench's, ``zookeeper_main.go``, without the
leader lock only a Pod can take); named so that no test run of
the repository collects it.  The cluster profile runs the Pods (the StatefulSet controller,
the scheduler, the simulated Nodes); the PersistentVolume binder and the claims' protection
bind each claim to a volume made here.  The operator's CRD is ``apiextensions.k8s.io/
v1beta1`` (removed in Kubernetes 1.22): it is installed as v1, its schema open.  ZooKeeper
itself, which the operator asks on its client port when the cluster's size changes, is a
server of the test's behind the client Service's name (``services.serve_tcp``): the few
requests of ZooKeeper's protocol the operator sends (connect, exists, set data, ping, close).

Releases of 2021 use ``policy/v1beta1`` PodDisruptionBudgets, which Kubernetes removed in
1.25 (every version buildable here is newer): their reconcile stops at the budget, after the
finalizer, the StatefulSet and the Services, before the status.  The recreate workload
(#312) needs none of the status; the scale-down workload (#314) does (the operator cleans
up a claim only once the status says every replica is ready), so that bug cannot show here.
"""

from __future__ import annotations

import os
import socketserver
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from scenario_support import gone, local_volumes, pod_running

from envtest import WaitTimeoutError, eventually

SOURCE = Path(os.environ["ZK_SOURCE"])
BINARY = os.environ["ZK_BINARY"]
GROUP, VERSION, PLURAL = "zookeeper.pravega.io", "v1beta1", "zookeeperclusters"
NAME = "zookeeper-cluster"


def crd_v1() -> dict[str, Any]:
    """The operator's CRD: from v0.2.14 on its own v1 CRD with its schema; before, its
    v1beta1 CRD as v1: its names and status subresource, an open schema."""
    generated = SOURCE / "config/crd/bases/zookeeper.pravega.io_zookeeperclusters.yaml"
    if generated.exists():
        return next(d for d in yaml.safe_load_all(generated.read_text()) if d)
    old = yaml.safe_load((SOURCE / "deploy/crds/zookeeper.pravega.io_zookeeperclusters_crd"
                          ".yaml").read_text())
    spec = old["spec"]
    versions = spec.get("versions") or [{"name": spec["version"], "served": True,
                                         "storage": True}]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": old["metadata"]["name"]},
            "spec": {"group": spec["group"], "names": spec["names"], "scope": spec["scope"],
                     "versions": [{"name": v["name"], "served": v.get("served", True),
                                   "storage": v.get("storage", True),
                                   "subresources": spec.get("subresources") or {},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}
                                  for v in versions]}}


pytestmark = [pytest.mark.envtest_profile("cluster"),
              pytest.mark.envtest_controllers("persistentvolume-binder", "pvc-protection",
                                              "pv-protection"),
              pytest.mark.envtest_crds(crd_v1())]


class ZooKeeper(socketserver.BaseRequestHandler):
    """The requests of ZooKeeper's protocol the operator sends, answered as a server does:
    a session on connect, every znode there (version 0), set data accepted, pings."""

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.request.recv(size - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def _frame(self) -> bytes:
        return self._read(struct.unpack(">i", self._read(4))[0])

    def _send(self, body: bytes) -> None:
        self.request.sendall(struct.pack(">i", len(body)) + body)

    def handle(self) -> None:
        stat = struct.pack(">qqqqiiiqiiq", 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1)
        try:
            self._frame()  # the connect request
            self._send(struct.pack(">iiqi", 0, 5000, 0x1234, 16) + b"\0" * 16)
            while True:
                frame = self._frame()
                xid, opcode = struct.unpack(">ii", frame[:8])
                header = struct.pack(">iqi", xid, 1, 0)
                if opcode == -11:  # close
                    self._send(header)
                    return
                body = stat if opcode in (3, 4, 5) else b""
                if opcode == 4:  # get data: empty data, then its stat
                    body = struct.pack(">i", -1) + stat
                self._send(header + body)
        except (EOFError, OSError):
            return


def start(run_operator: Any, namespace: str, services: Any) -> Any:
    services.serve_tcp(f"{NAME}-client", 2181, handler=ZooKeeper)
    return run_operator([BINARY], name="zookeeper-operator",
                        env={"WATCH_NAMESPACE": namespace, "OPERATOR_NAME":
                             "zookeeper-operator"})


@pytest.fixture
def volumes(k8s: Any, namespace: str) -> Iterator[str]:
    """A StorageClass and volumes for the claims to bind to."""
    yield from local_volumes(k8s, namespace)


def cluster(storage_class: str, replicas: int = 1) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZookeeperCluster",
            "metadata": {"name": NAME},
            "spec": {"replicas": replicas, "persistence": {
                "reclaimPolicy": "Delete",
                "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "20Gi"}}}}}}


def claim(k8s: Any, namespace: str, index: int = 0) -> Any:
    return k8s.core.read_namespaced_persistent_volume_claim(f"data-{NAME}-{index}", namespace)


def test_recreate(run_operator: Any, apply: Any, k8s: Any, namespace: str, volumes: str,
                  services: Any) -> None:
    """Sieve's "recreate": a cluster made, deleted, made again (zookeeper-operator#312)."""
    start(run_operator, namespace, services)
    apply(cluster(volumes))
    eventually(lambda: pod_running(k8s, namespace, f"{NAME}-0"), timeout=90)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
    eventually(lambda: gone(lambda: k8s.core.read_namespaced_pod(f"{NAME}-0", namespace)),
               timeout=90)
    eventually(lambda: gone(lambda: claim(k8s, namespace)), timeout=90)
    apply(cluster(volumes))
    eventually(lambda: pod_running(k8s, namespace, f"{NAME}-0"), timeout=90)
    eventually(lambda: claim(k8s, namespace).status.phase == "Bound", timeout=60)


def sts_replicas(k8s: Any, namespace: str) -> int:
    return int(k8s.apps.read_namespaced_stateful_set(NAME, namespace).spec.replicas)


def test_scaledown_scaleup(run_operator: Any, apply: Any, k8s: Any, namespace: str,
                           volumes: str, services: Any) -> None:
    """Sieve's "scaledown-scaleup": 2 replicas, 1, then 2 again (zookeeper-operator#314).
    The workload goes on after a bounded wait for each step, as Sieve's waits for Pods."""
    start(run_operator, namespace, services)
    apply(cluster(volumes, replicas=2))
    eventually(lambda: pod_running(k8s, namespace, f"{NAME}-1"), timeout=90)
    apply(cluster(volumes, replicas=1))
    eventually(lambda: gone(lambda: k8s.core.read_namespaced_pod(f"{NAME}-1", namespace)),
               timeout=90)
    try:  # the operator deletes the claim of a replica scaled away once its status is ready
        eventually(lambda: gone(lambda: claim(k8s, namespace, 1)), timeout=20)
    except WaitTimeoutError:
        pass
    apply(cluster(volumes, replicas=2))
    eventually(lambda: pod_running(k8s, namespace, f"{NAME}-1"), timeout=90)
    assert sts_replicas(k8s, namespace) == 2



#: The client Service's annotations, through spec.clientService (Acto's workload for
#: zookeeper-operator#474).
CLIENT_SERVICE = {"annotations": {"owner": "data"}}


def client_annotations(k8s: Any, namespace: str) -> dict[str, str]:
    try:
        service = k8s.core.read_namespaced_service(f"{NAME}-client", namespace)
    except Exception:
        return {}
    return dict(service.metadata.annotations or {})


@pytest.mark.envtest_explore("operations", fields=["spec.clientService.*",
                                                   "spec.headlessService.*",
                                                   "spec.adminServerService.*"])
def test_service_annotations(run_operator: Any, apply: Any, k8s: Any, namespace: str,
                             services: Any) -> None:
    """Acto's operations on the Services' annotations (zookeeper-operator#474): a cluster
    whose client Service carries an annotation of the user's, operations then change the
    annotations of its three Services.  Its storage is ephemeral (no claims: the trials'
    clusters would each want volumes)."""
    start(run_operator, namespace, services)
    body = cluster("")
    body["spec"] = {"replicas": 1, "storageType": "ephemeral",
                    "clientService": CLIENT_SERVICE}
    apply(body)
    eventually(lambda: client_annotations(k8s, namespace).get("owner") == "data", timeout=60)
