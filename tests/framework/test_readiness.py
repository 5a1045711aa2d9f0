"""readiness="admin": started as soon as the admin can work; other users wait for RBAC bootstrap."""

from __future__ import annotations

import kubernetes.client

from envtest.controlplane import ControlPlane
from envtest.polling import eventually


def test_admin_readiness_serves_the_admin_and_makes_new_users_wait_for_bootstrap() -> None:
    with ControlPlane(readiness="admin") as control_plane:
        admin = kubernetes.client.CoreV1Api(control_plane.api_client())
        admin.create_namespace({"metadata": {"name": "early"}})  # usable at once

        viewer = control_plane.add_user("viewer")  # waits for the bootstrap roles
        kubernetes.client.RbacAuthorizationV1Api(control_plane.api_client()) \
            .create_namespaced_role_binding("early", {
                "metadata": {"name": "viewer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            # a bootstrap ClusterRole ("view"/"edit" are aggregated, and
                            # aggregation needs kube-controller-manager)
                            "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                              "name": "viewer"}]})
        client = viewer.api_client()
        try:
            # RBAC reads bindings from a cache: a new binding takes effect within moments.
            pods = eventually(lambda: kubernetes.client.CoreV1Api(client).list_namespaced_pod(
                "early"), timeout=10, ignore=(kubernetes.client.ApiException,))
        finally:
            client.close()
        assert pods.items == []
        scheduling = kubernetes.client.SchedulingV1Api(control_plane.api_client())
        names = {p.metadata.name for p in scheduling.list_priority_class().items}
        assert {"system-cluster-critical", "system-node-critical"} <= names


def test_full_readiness_is_the_default_of_the_class() -> None:
    assert ControlPlane().readiness == "full"
