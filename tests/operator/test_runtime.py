"""The operator's controller runtime on a real control plane: expired watches, conflicts, retries.

- A watch that expires (410 Gone) while the operator is cut off from the apiserver: a dedicated
  control plane with the watch cache off (so a watch resumes from etcd itself), a TCP proxy
  between operator and apiserver that the test cuts and heals, and an etcd compaction made
  through etcd's v3 JSON gateway while the operator is cut off. Changes made meanwhile must be
  reconciled after the relist.
- A conflict: a validating webhook on the operator's status update lets another writer update
  the same status first, so the operator's write fails with 409 and must be retried on fresh data.
- An exception in a reconcile: a policy webhook refuses the operator's updates of one RayJob a
  few times; the reconcile is retried with growing back-off and each failure is logged with its
  key, then it converges.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from envtest import MERGE_PATCH, ControlPlane, admission, eventually, request
from ray_operator.resources import PODS, RAYCLUSTERS

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "operator" / "config" / "crd"
RBAC = ROOT / "operator" / "config" / "rbac" / "role.yaml"
GROUP, VERSION = "ray.io", "v1"


def small_cluster(name: str, workers: int = 1) -> dict[str, Any]:
    container = {"name": "ray", "image": "rayproject/ray:2.9.0"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [container]}}},
            "workerGroupSpecs": [{"groupName": "g", "replicas": workers, "minReplicas": 0,
                                  "maxReplicas": 10,
                                  "template": {"spec": {"containers": [container]}}}],
        },
    }


def live_pods(api_client: Any, namespace: str, cluster: str, node_type: str) -> list[str]:
    items = request(api_client, "GET", f"/api/v1/namespaces/{namespace}/pods",
                    query={"labelSelector": f"ray.io/cluster={cluster},"
                                            f"ray.io/node-type={node_type}"})["items"]
    return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]


# -- 410 Gone -------------------------------------------------------------------------------


class Partition:
    """A loopback TCP proxy to the apiserver: ``cut()`` drops every connection through it and
    turns new ones away (the operator sees a network partition), ``heal()`` lets them through
    again. TLS goes through untouched, so the operator still talks to the real apiserver."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self.refused = 0
        threading.Thread(target=self._accept, name="partition-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            sockets, self._sockets = set(self._sockets), set()
        for sock in sockets:
            _close(sock)

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), 5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                _close(sock)
                with self._lock:
                    self._sockets.discard(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def compact_etcd(control_plane: ControlPlane, revision: int) -> None:
    """Compact etcd's history up to ``revision`` through its v3 JSON gateway (client cert)."""
    pki = control_plane.pki
    assert pki is not None and control_plane.etcd is not None
    context = ssl.create_default_context(cafile=str(pki.serving_ca_path))
    context.load_cert_chain(str(pki.etcd_client_cert), str(pki.etcd_client_key))
    answer = httpx.post(f"{control_plane.etcd.url}/v3/kv/compaction",
                        json={"revision": str(revision), "physical": True}, verify=context,
                        timeout=10)
    answer.raise_for_status()


@pytest.fixture
def uncached_control_plane(make_control_plane) -> ControlPlane:
    """A control plane of the test's own whose apiserver serves watches from etcd directly: a
    watch resumed from a compacted revision then fails with 410 Gone, as on a busy cluster (the
    session's apiserver answers old versions from its watch cache instead)."""
    return make_control_plane(crds=[CRDS], apiserver_args={"watch-cache": "false"})


def test_expired_watch_relists_and_reconciles_what_changed_meanwhile(uncached_control_plane,
                                                                    ray_operator):
    cp = uncached_control_plane
    admin = cp.api_client()
    namespace = "gone"
    request(admin, "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    partition = Partition(cp.apiserver.port)
    try:
        handle = ray_operator(cluster=cp, api_host=partition.url,  # all through the proxy
                              name="gone", namespace=namespace, controllers=("raycluster",),
                              error_requeue_seconds=0.2)
        running, operator = handle.running, handle.operator
        clusters = operator.informers.informer(RAYCLUSTERS)
        pods = operator.informers.informer(PODS)
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/rayclusters"
        request(admin, "POST", path, body=small_cluster("before"))
        eventually(lambda: len(live_pods(admin, namespace, "before", "worker")) == 1,
                   timeout=10)
        assert (clusters.relists, pods.relists) == (1, 1)

        partition.cut()
        # While the operator cannot see anything: one cluster scaled, one created ...
        request(admin, "PATCH", f"{path}/before", content_type=MERGE_PATCH,
                body={"spec": {"workerGroupSpecs": small_cluster("before", 3)["spec"][
                    "workerGroupSpecs"]}})
        created = request(admin, "POST", path, body=small_cluster("during"))
        # ... and the history of those changes compacted away, so no watch can replay them.
        compact_etcd(cp, int(created["metadata"]["resourceVersion"]))
        # The operator really was cut off: it kept trying and was turned away.
        eventually(lambda: partition.refused >= 2, timeout=10)
        assert len(live_pods(admin, namespace, "before", "worker")) == 1
        assert live_pods(admin, namespace, "during", "head") == []
        partition.heal()

        eventually(lambda: clusters.relists >= 2 and pods.relists >= 2, timeout=30,
                   message="the informers never relisted after their watches expired")
        eventually(lambda: len(live_pods(admin, namespace, "before", "worker")) == 3,
                   timeout=15, message="the scale-up made during the partition was lost")
        eventually(lambda: len(live_pods(admin, namespace, "during", "head")) == 1
                   and len(live_pods(admin, namespace, "during", "worker")) == 1, timeout=15,
                   message="the RayCluster created during the partition was never reconciled")
        assert "410 Gone" in running.logs() and "relisting" in running.logs()
        running.check()
    finally:
        partition.close()


# -- conflicts -----------------------------------------------------------------------------


def webhook_config(name: str, namespace: str, path: str, resources: list[str],
                   side_effects: str = "None") -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.tests.ray.io",
            "clientConfig": {"url": f"https://placeholder{path}"},
            "rules": [{"apiGroups": [GROUP], "apiVersions": [VERSION], "operations": ["UPDATE"],
                       "resources": resources}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "sideEffects": side_effects,
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
        }],
    }


def test_status_write_conflict_is_retried_on_fresh_data(ray_operator, apply, k8s, namespace,
                                                        pods, wait_for, webhooks, api_calls):
    op = ray_operator(controllers=("raycluster",))
    interfered = threading.Event()

    def another_writer_first(review: dict[str, Any]) -> dict[str, Any]:
        """The operator's status update is in flight: another writer gets there first."""
        if (review["userInfo"]["username"] == op.user and not review.get("dryRun")
                and not interfered.is_set()):
            interfered.set()
            current = k8s.custom.get_namespaced_custom_object_status(
                GROUP, VERSION, namespace, "rayclusters", review["name"])
            current.setdefault("status", {})["reason"] = "written by another controller"
            k8s.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, namespace, "rayclusters", review["name"], current)
        return admission.allow()

    webhooks.route("/race", another_writer_first).install(
        webhook_config(f"race-{uuid.uuid4().hex[:10]}", namespace, "/race", ["rayclusters/status"],
                       side_effects="NoneOnDryRun"))
    apply(small_cluster("contested"))
    eventually(interfered.is_set, timeout=10)
    head, worker = eventually(lambda: (live_pods(k8s.api_client, namespace, "contested", "head")
                                       + live_pods(k8s.api_client, namespace, "contested",
                                                   "worker")), timeout=10)
    for pod in (head, worker):
        pods.set_running(pod)
    status = wait_for("RayCluster", "contested",
                      lambda o: (o.get("status") or {}).get("state") == "ready")["status"]
    assert "reason" not in status, "the retry must rebuild the status from fresh data"
    assert status["availableWorkerReplicas"] == 1

    # injected=False: the apiserver's answers (an explored run's injected 409s aside).
    writes = api_calls.calls(verb="update", resource="rayclusters", subresource="status",
                             namespace=namespace, injected=False)
    mine = [c for c in writes if c.user == op.user]
    conflicts = [c for c in mine if c.code == 409]
    assert len(conflicts) == 1, api_calls.summary(namespace=namespace)
    other = [c for c in writes if c.user != op.user and c.succeeded]
    assert len(other) == 1 and other[0].offset < conflicts[0].offset
    assert any(c.succeeded and c.offset > conflicts[0].offset for c in mine), \
        "the conflicting write was never retried"
    injected = api_calls.count(user=op.user, verb="update", resource="rayclusters",
                               subresource="status", injected=True, code=409)
    retries = op.retries("raycluster", f"{namespace}/contested")  # every instance's
    assert [r.reason for r in retries] == ["conflict"] * (1 + injected), retries
    assert any("the object has been modified" in r.message for r in retries), retries


# -- exceptions and back-off -----------------------------------------------------------------

DENIALS = 4
BACKOFF_BASE = 0.1


def test_reconcile_exception_is_retried_with_growing_backoff_and_logged_with_its_key(
        ray_operator, apply, k8s, namespace, wait_for, webhooks, api_calls):
    op = ray_operator(controllers=("rayjob",), backoff_base_seconds=BACKOFF_BASE)
    attempts: list[float] = []

    def frozen_finalizers(review: dict[str, Any]) -> dict[str, Any]:
        """A policy engine that refuses the operator's first few updates of RayJobs."""
        if review["userInfo"]["username"] != op.user:
            return admission.allow()
        attempts.append(time.monotonic())
        if len(attempts) <= DENIALS:
            return admission.deny(f"policy test-freeze: RayJob updates are frozen (attempt "
                        f"{len(attempts)})")
        return admission.allow()

    webhooks.route("/freeze", frozen_finalizers).install(
        webhook_config(f"freeze-{uuid.uuid4().hex[:10]}", namespace, "/freeze", ["rayjobs"]))
    apply({"apiVersion": f"{GROUP}/{VERSION}", "kind": "RayJob", "metadata": {"name": "stuck"},
           "spec": {"entrypoint": "python -c 'pass'",
                    "rayClusterSpec": small_cluster("unused")["spec"]}})

    job = wait_for("RayJob", "stuck", lambda o: "ray.io/rayjob-finalizer" in (
        o["metadata"].get("finalizers") or []), timeout=15)
    assert len(attempts) == DENIALS + 1  # an injected 409 (exploration) never reaches it

    # Every failure of the key grows its back-off, a denial or a conflict (one injected under
    # --envtest-explore): base * 2^n for the n-th retry of an instance (a fresh instance,
    # after a crash fault, starts again from the base).
    retries = op.retries("rayjob", f"{namespace}/stuck")
    errors = [r for r in retries if r.reason == "error"]
    conflicts = api_calls.count(user=op.user, verb="update", resource="rayjobs",
                                subresource="", injected=True, code=409)
    # (A conflict on the finalizer's update is retried in place, as client-go's
    # RetryOnConflict does; one elsewhere goes back to the queue.)
    assert len(errors) == DENIALS and len(retries) <= DENIALS + conflicts, retries
    assert {r.reason for r in retries} <= {"error", "conflict"}, retries
    for instance in op.instances:
        mine = [r for r in op.retries_of(instance, "rayjob") if r.key == f"{namespace}/stuck"]
        assert [r.delay_seconds for r in mine] == pytest.approx(
            [BACKOFF_BASE * 2 ** i for i in range(len(mine))]), mine
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    for gap, retry in zip(gaps, errors, strict=True):
        assert gap >= retry.delay_seconds * 0.9, \
            f"retried after {gap:.3f}s, back-off was {retry.delay_seconds}s: {gaps}"
    # (The gaps themselves are lower-bounded only: on a loaded machine a short back-off can
    # take longer than the next one, so growth is asserted on the delays the operator chose.)
    assert "policy test-freeze: RayJob updates are frozen (attempt 1)" in errors[0].message
    assert "Traceback" in op.logs()  # a human reading the log gets the whole story
    denied = api_calls.calls(user=op.user, verb="update", resource="rayjobs",
                             subresource="", namespace=namespace, injected=False)
    assert [c.code for c in denied] == [403] * DENIALS + [200]

    # Then it goes on as if nothing happened.
    assert wait_for("RayJob", "stuck", lambda o: (o.get("status") or {}).get(
        "jobDeploymentStatus"))["metadata"]["uid"] == job["metadata"]["uid"]
