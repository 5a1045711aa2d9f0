"""Controllers on demand: kube-controller-manager with only the controllers a test asks for.

The top complaints about envtest are that namespaces never finish deleting and
owned objects are never collected, because no controller-manager runs.  These
tests run the real one, built from the same Kubernetes version, and check that
it does the job, is authenticated as itself, and leaves nothing behind.
"""

from __future__ import annotations

import psutil
import pytest
from kubernetes.client.rest import ApiException

from envtest import ControlPlane, ExistingCluster, deleted, eventually, wait_for

CONTROLLERS = ("garbagecollector", "namespace", "serviceaccount", "serviceaccount-token")
with_controllers = pytest.mark.envtest_controllers(*CONTROLLERS)


def _configmap(name: str, owner: dict | None = None, **metadata: object) -> dict:
    meta: dict = {"name": name, **metadata}
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def _exists(read, *args) -> bool:  # type: ignore[no-untyped-def]
    try:
        read(*args)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


@with_controllers
def test_controller_manager_runs_only_the_controllers_asked_for(envtest) -> None:
    assert "kube-controller-manager" in envtest.pids
    command = psutil.Process(envtest.pids["kube-controller-manager"]).cmdline()
    # The names as the binary spells them (the short forms asked for are its aliases).
    assert ("--controllers=garbage-collector-controller,namespace-controller,"
            "serviceaccount-controller,serviceaccount-token-controller") in command
    assert "--use-service-account-credentials=true" in command


@with_controllers
def test_default_service_account_appears(k8s, namespace) -> None:
    account = eventually(lambda: k8s.core.read_namespaced_service_account("default", namespace),
                         timeout=30, ignore=(ApiException,))
    assert account.metadata.name == "default"


@with_controllers
@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_owned_objects_are_garbage_collected(k8s, namespace, propagation) -> None:
    owner = k8s.core.create_namespaced_config_map(namespace, _configmap("owner")).to_dict()
    k8s.core.create_namespaced_config_map(namespace, _configmap("child", owner))
    k8s.core.delete_namespaced_config_map("owner", namespace,
                                          body={"propagationPolicy": propagation})
    wait_for(k8s.api_client, "ConfigMap", "child", deleted, namespace=namespace, timeout=30)
    wait_for(k8s.api_client, "ConfigMap", "owner", deleted, namespace=namespace, timeout=30)


@with_controllers
def test_namespace_deletion_is_finished_by_the_namespace_controller(k8s, envtest) -> None:
    name = "kcm-deletes-me"
    k8s.core.create_namespace({"metadata": {"name": name}})
    k8s.core.create_namespaced_config_map(name, _configmap("data"))
    k8s.core.create_namespaced_pod(name, {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}]}})
    k8s.core.delete_namespace(name)  # the plain API call: no help from the framework
    wait_for(k8s.api_client, "Namespace", name, deleted, timeout=60)
    writers = {c.user for c in envtest.audit_log.calls(namespace=name,
                                                        verb=("delete", "deletecollection"))}
    assert any(u.startswith("system:serviceaccount:kube-system:") for u in writers), writers


def test_without_controllers_no_controller_manager_runs(envtest, k8s) -> None:
    assert "kube-controller-manager" not in envtest.pids
    k8s.core.create_namespace({"metadata": {"name": "orphan-collected-by-us"}})
    owner = k8s.core.create_namespaced_config_map("orphan-collected-by-us",
                                                  _configmap("owner")).to_dict()
    k8s.core.create_namespaced_config_map("orphan-collected-by-us",
                                          _configmap("child", owner))
    k8s.core.delete_namespaced_config_map("owner", "orphan-collected-by-us")
    # nothing collects the child here ...
    assert _exists(k8s.core.read_namespaced_config_map, "child", "orphan-collected-by-us")
    # ... but the framework's namespace cleanup still removes everything
    from envtest import delete_namespace

    delete_namespace(k8s.api_client, "orphan-collected-by-us")
    assert not _exists(k8s.core.read_namespace, "orphan-collected-by-us")


def test_controller_manager_is_stopped_with_the_control_plane() -> None:
    control_plane = ControlPlane(controllers=("garbagecollector",)).start()
    pids = dict(control_plane.pids)
    workdir = control_plane.workdir
    try:
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    finally:
        control_plane.stop()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                   for p in pids.values())
    assert workdir is not None and not workdir.exists()


def test_existing_cluster_add_user_through_a_certificate_signing_request() -> None:
    """On an existing cluster users come from the CSR API; our own control plane with the
    csrsigning controller stands in for a real cluster."""
    with ControlPlane(controllers=("csrsigning", "csrapproving")) as control_plane:
        cluster = ExistingCluster(control_plane.kubeconfig_path).start()
        try:
            user = cluster.add_user("carol", groups=("testers",))
            client = user.api_client()
            try:
                from kubernetes.client import AuthenticationV1Api

                review = AuthenticationV1Api(client).create_self_subject_review(
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            finally:
                client.close()
            assert review.status.user_info.username == "carol"
            assert "testers" in review.status.user_info.groups
            assert oct(user.kubeconfig_path.stat().st_mode & 0o777) == "0o600"
        finally:
            cluster.stop()


# -- custom resources: the controllers see a CRD installed after they started -----------------


def _crd(plural: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.cascade.example.com"},
            "spec": {"group": "cascade.example.com", "scope": "Namespaced",
                     "names": {"kind": plural.capitalize()[:-1], "plural": plural},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _cascade_seconds(api_client, namespace: str, plural: str, rounds: int = 20) -> list[float]:
    """Create a custom resource with a ConfigMap child, delete it, time until the child goes."""
    import time

    import kubernetes

    custom = kubernetes.client.CustomObjectsApi(api_client)
    core = kubernetes.client.CoreV1Api(api_client)
    kind = plural.capitalize()[:-1]
    seconds = []
    for index in range(rounds):
        owner = custom.create_namespaced_custom_object(
            "cascade.example.com", "v1", namespace, plural,
            {"apiVersion": "cascade.example.com/v1", "kind": kind,
             "metadata": {"name": f"owner-{index}"}})
        core.create_namespaced_config_map(namespace, {"metadata": {
            "name": f"child-{index}", "ownerReferences": [{
                "apiVersion": "cascade.example.com/v1", "kind": kind,
                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]}})
        started = time.monotonic()
        custom.delete_namespaced_custom_object("cascade.example.com", "v1", namespace, plural,
                                               f"owner-{index}")
        eventually(lambda i=index: not _exists(core.read_namespaced_config_map, f"child-{i}",
                                               namespace), timeout=60, interval=0.02)
        seconds.append(time.monotonic() - started)
    return seconds


@pytest.mark.envtest_controllers("garbagecollector")
def test_a_crd_installed_after_the_controllers_started_is_collected_at_once(
        install_crds, k8s, namespace) -> None:
    plural = f"widgets{namespace[-5:]}"
    install_crds(_crd(plural))  # the garbage collector started long before
    try:
        seconds = _cascade_seconds(k8s.api_client, namespace, plural)
        assert max(seconds) < 2.0, f"cascades took {[round(s, 2) for s in seconds]} s"
    finally:
        from envtest import uninstall_crds

        uninstall_crds(k8s.api_client, [f"{plural}.cascade.example.com"])


def test_a_crd_given_to_a_control_plane_with_controllers_is_collected_at_once(
        make_control_plane) -> None:
    from envtest import create_namespace

    own = make_control_plane(controllers=("garbagecollector",), crds=[_crd("gadgets")])
    create_namespace(own.api_client(), "cascade")
    seconds = _cascade_seconds(own.api_client(), "cascade", "gadgets")
    assert max(seconds) < 2.0, f"cascades took {[round(s, 2) for s in seconds]} s"
