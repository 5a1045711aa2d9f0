"""readiness="admin": started as soon as the admin can work; other users wait for RBAC bootstrap."""

from __future__ import annotations

import kubernetes.client
import pytest

from envtest import ConfigurationError, ControlPlane


def test_admin_readiness_serves_the_admin_and_makes_new_users_wait_for_bootstrap() -> None:
    with ControlPlane(readiness="admin") as control_plane:
        admin = kubernetes.client.CoreV1Api(control_plane.api_client())
        admin.create_namespace({"metadata": {"name": "early"}})  # usable at once

        # add_user returns only once the bootstrap RBAC exists, so the new user's very first
        # requests succeed: no retry here.  (Started this moment, the apiserver is still in
        # the bootstrap's fixed one-second pause: without the wait in add_user, both 403.)
        viewer = control_plane.add_user("viewer")
        client = viewer.api_client()
        try:
            # Discovery and self-review are granted to every authenticated user by bootstrap
            # ClusterRoleBindings (system:discovery, system:basic-user).
            kubernetes.client.CoreApi(client).get_api_versions()
            review = kubernetes.client.AuthenticationV1Api(client).create_self_subject_review(
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        finally:
            client.close()
        assert review.status.user_info.username == "viewer"
        scheduling = kubernetes.client.SchedulingV1Api(control_plane.api_client())
        names = {p.metadata.name for p in scheduling.list_priority_class().items}
        assert {"system-cluster-critical", "system-node-critical"} <= names


def test_admin_readiness_is_the_one_default_and_the_environment_can_change_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVTEST_READINESS", raising=False)
    assert ControlPlane().readiness == "admin"
    monkeypatch.setenv("ENVTEST_READINESS", "full")
    assert ControlPlane().readiness == "full"
    assert ControlPlane(readiness="admin").readiness == "admin"
    monkeypatch.setenv("ENVTEST_READINESS", "eventually")
    with pytest.raises(ConfigurationError, match="ENVTEST_READINESS='eventually': choose one"):
        ControlPlane()
