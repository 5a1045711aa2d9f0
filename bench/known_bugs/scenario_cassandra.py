"""Sieve's workloads for DataStax's Cassandra operator (k8ssandra/cass-operator), as tests.

Run by ``bench/bench_known_bugs.py`` with ``CASS_SOURCE`` (the operator's module source,
for its CRD and image config) and ``CASS_BINARY`` (its manager built from it); named so that
no test run of the repository collects it.  The cluster profile runs the Pods (the
StatefulSet controller, the scheduler, the simulated Nodes); the PersistentVolume binder
and the claims' protection bind each claim to a volume made here.

The operator asks each Cassandra node's management API (HTTP on port 8080 of the Pod's IP,
behind the Services it makes) to start Cassandra, lists the endpoints, reloads seeds and
makes roles: the test serves the few calls it sends (``services.serve``), answered as a
node that started does.  Its configuration file turns its admission webhook off (it would
need a serving certificate) and its metrics and health ports (several run at once).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException
from scenario_support import gone, local_volumes, pod_running

from envtest import eventually

SOURCE = Path(os.environ["CASS_SOURCE"])
BINARY = os.environ["CASS_BINARY"]
GROUP, VERSION, PLURAL = "cassandra.datastax.com", "v1beta1", "cassandradatacenters"
NAME = "cassandra-datacenter"
POD = "cluster1-cassandra-datacenter-default-sts-0"
CLAIM = f"server-data-{POD}"

pytestmark = [pytest.mark.envtest_profile("cluster"),
              pytest.mark.envtest_controllers("persistentvolume-binder", "pvc-protection",
                                              "pv-protection"),
              pytest.mark.envtest_crds(*(yaml.safe_load(crd.read_text()) for crd in sorted(
                  (SOURCE / "config/crd/bases").glob("*.yaml"))))]


def management_api(k8s: Any, namespace: str, kubelet: Any) -> type[BaseHTTPRequestHandler]:
    """A node's management API, for the calls the operator makes: ``/start`` starts
    Cassandra, and its Pod turns ready (``kubelet.ready``) as the readiness probe of a
    started node would (the Pods' plan keeps them Running and not ready until then)."""

    up: set[str] = set()  # the addresses of the nodes started

    class ManagementApi(BaseHTTPRequestHandler):
        def _answer(self, code: int, body: Any) -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.startswith("/api/v0/metadata/endpoints"):  # the nodes started
                self._answer(200, {"entity": [
                    {"DC": NAME, "RACK": "default", "HOST_ID": f"host-{address}",
                     "IS_ALIVE": "true", "ENDPOINT_IP": address, "RPC_ADDRESS": address,
                     "STATUS": "NORMAL,-1", "LOAD": "1.0"} for address in sorted(up)]})
            elif self.path.startswith("/api/v0/metadata/versions/features"):
                self._answer(404, "not found")
            else:
                self._answer(200, "OK")

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if "/lifecycle/start" in self.path:
                address = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                up.add(address)
                for pod in k8s.core.list_namespaced_pod(
                        namespace, field_selector=f"status.podIP={address}").items:
                    kubelet.ready(pod.metadata.name)
                self._answer(201, "OK")
            else:
                self._answer(200, "OK")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ManagementApi


def start(run_operator: Any, k8s: Any, namespace: str, services: Any, kubelet: Any,
          folder: Path) -> Any:
    kubelet.plan("cassandra.datastax.com/cluster=cluster1", outcome="running")
    services.serve("cluster1-cassandra-datacenter-*", 8080,
                   handler=management_api(k8s, namespace, kubelet))
    config = folder / "operator-config.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "config.k8ssandra.io/v1beta1", "kind": "OperatorConfig",
        "health": {"healthProbeBindAddress": "0"}, "metrics": {"bindAddress": "0"},
        "leaderElection": {"leaderElect": False}, "disableWebhooks": True,
        "imageConfigFile": str(SOURCE / "config/manager/image_config.yaml")}))
    return run_operator([BINARY, f"--config={config}"], name="cass-operator",
                        env={"WATCH_NAMESPACE": namespace})


@pytest.fixture
def volumes(k8s: Any, namespace: str) -> Iterator[str]:
    """A StorageClass and volumes for the claims to bind to."""
    yield from local_volumes(k8s, namespace)


def datacenter(storage_class: str, size: int = 1) -> dict[str, Any]:
    """Sieve's cdc-1.yaml (cdc-2 with ``size=2``), its storage class the test's, without
    its ``config`` (Cassandra's own settings: the CRD declares the field a base64 string
    that keeps unknown fields, and an apiserver of today refuses the object it holds)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "CassandraDatacenter",
            "metadata": {"name": NAME},
            "spec": {"clusterName": "cluster1", "serverType": "cassandra",
                     "serverVersion": "3.11.7", "managementApiAuth": {"insecure": {}},
                     "size": size,
                     "storageConfig": {"cassandraDataVolumeClaimSpec": {
                         "storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "3Gi"}}}}}}


def make(k8s: Any, namespace: str, storage_class: str) -> None:
    """Created as Sieve's ``kubectl apply`` of a new object does."""
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                               datacenter(storage_class))


def claim(k8s: Any, namespace: str) -> Any:
    return k8s.core.read_namespaced_persistent_volume_claim(CLAIM, namespace)


def ready(k8s: Any, namespace: str) -> bool:
    """The operator says the datacenter is ready: every node started."""
    try:
        found = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                        NAME)
    except ApiException:
        return False
    return (found.get("status") or {}).get("cassandraOperatorProgress") == "Ready"


def test_recreate(run_operator: Any, k8s: Any, namespace: str, volumes: str,
                  services: Any, kubelet: Any, tmp_path: Path) -> None:
    """Sieve's "recreate": a datacenter made, deleted, made again (K8SSAND-559, and
    K8SSAND-1023 met on the way: the keystore made in two steps)."""
    start(run_operator, k8s, namespace, services, kubelet, tmp_path)
    make(k8s, namespace, volumes)
    eventually(lambda: pod_running(k8s, namespace, POD), timeout=90)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, NAME)
    eventually(lambda: gone(lambda: k8s.core.read_namespaced_pod(POD, namespace)),
               timeout=90)
    eventually(lambda: gone(lambda: claim(k8s, namespace)), timeout=90)
    make(k8s, namespace, volumes)
    eventually(lambda: pod_running(k8s, namespace, POD), timeout=90)
    eventually(lambda: claim(k8s, namespace).status.phase == "Bound", timeout=60)
    eventually(lambda: ready(k8s, namespace), timeout=90)


#: Labels and annotations of the datacenter's own Service, through additionalServiceConfig
#: (Acto's workload for cass-operator#330).
SERVICE_CONFIG = {"dcService": {"additionalLabels": {"team": "storage"},
                                "additionalAnnotations": {"owner": "data"}}}


def service_labels(k8s: Any, namespace: str) -> dict[str, str]:
    try:
        service = k8s.core.read_namespaced_service(f"cluster1-{NAME}-service", namespace)
    except ApiException:
        return {}
    return dict(service.metadata.labels or {})


@pytest.mark.envtest_explore("operations", fields=["spec.additionalServiceConfig.*"])
def test_service_config(run_operator: Any, k8s: Any, namespace: str, volumes: str,
                        services: Any, kubelet: Any, tmp_path: Path) -> None:
    """Acto's operations on the Services' configuration (cass-operator#330): a datacenter
    whose own Service carries a label and an annotation of the user's, operations then
    change its additionalServiceConfig.  The datacenter is stopped (no Cassandra node runs):
    the trials' datacenters share the test's namespace and its cluster name, and the nodes
    of one cluster are started one at a time across its datacenters (a trial's direct
    datacenter waited on the changed one's node); stopped, each keeps its own Services."""
    start(run_operator, k8s, namespace, services, kubelet, tmp_path)
    body = datacenter(volumes)
    body["spec"].update({"additionalServiceConfig": SERVICE_CONFIG, "stopped": True})
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    eventually(lambda: service_labels(k8s, namespace).get("team") == "storage", timeout=60)
    eventually(lambda: k8s.apps.read_namespaced_stateful_set(
        f"cluster1-{NAME}-default-sts", namespace).spec.replicas == 0, timeout=60)
