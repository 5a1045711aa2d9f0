"""api_calls: the audited requests of one test, by user, verb, resource, ... and time window."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
from framework_helpers import pod_body
from kubernetes.client.rest import ApiException

from envtest import ApiCalls, Clients, Cluster, eventually, namespace_name, set_pod_running

ADMIN = "envtest-admin"


@pytest.fixture
def other_user(envtest: Cluster) -> Iterator[kubernetes.client.ApiClient]:
    """A second client-certificate user with full rights."""
    client = envtest.add_user("pytest-envtest:second", ("system:masters",)).api_client()
    yield client
    client.close()


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_counts_and_lists_by_user_verb_resource_subresource_namespace_name(
        api_calls: ApiCalls, k8s: Clients, namespace: str,
        other_user: kubernetes.client.ApiClient) -> None:
    core = k8s.core
    core.create_namespaced_config_map(namespace, config_map("a"))
    core.create_namespaced_config_map(namespace, config_map("b"))
    core.patch_namespaced_config_map("a", namespace, {"data": {"x": "1"}})
    core.delete_namespaced_config_map("b", namespace)
    core.create_namespaced_pod(namespace, pod_body("p"))
    set_pod_running(k8s.api_client, "p", namespace)
    second = kubernetes.client.CoreV1Api(other_user)
    second.create_namespaced_config_map(namespace, config_map("c"))
    second.replace_namespaced_config_map("c", namespace, config_map("c", y="2"))
    core.read_namespaced_config_map("a", namespace)  # a read: not audited by default

    mine = api_calls.calls(user=ADMIN, namespace=namespace)
    assert [(c.verb, c.target, c.name) for c in mine] == [
        ("create", "configmaps", "a"), ("create", "configmaps", "b"), ("patch", "configmaps", "a"),
        ("delete", "configmaps", "b"), ("create", "pods", "p"), ("update", "pods/status", "p")]
    assert all(c.code in (200, 201) and c.succeeded for c in mine)
    assert api_calls.count(user=ADMIN, verb="create", resource="configmaps") == 2
    assert api_calls.count(user="pytest-envtest:second") == 2
    assert api_calls.count(user=[ADMIN, "pytest-envtest:second"], resource="configmaps") == 6
    assert api_calls.count(verb=["update", "patch"], resource="configmaps",
                           namespace=namespace) == 2
    assert api_calls.count(resource="pods", subresource="status", namespace=namespace) == 1
    assert api_calls.count(resource="pods", subresource="", namespace=namespace) == 1  # Pod only
    assert api_calls.count(resource="pods", namespace=namespace) == 2  # either
    assert api_calls.count(name="c", namespace=namespace) == 2
    assert api_calls.count(name="a", verb="patch", namespace=namespace) == 1
    assert api_calls.count(verb="get") == 0
    # (kube-apiserver itself renews its identity lease in kube-system every few seconds.)
    assert api_calls.count(namespace="kube-system", user=[ADMIN, "pytest-envtest:second"]) == 0
    assert api_calls.count(api_group="") >= 8
    update = api_calls.calls(user="pytest-envtest:second", verb="update")[0]
    assert update.uri == f"/api/v1/namespaces/{namespace}/configmaps/c"
    assert "system:masters" in update.groups
    assert update.user_agent.startswith("OpenAPI-Generator")
    assert update.received is not None and update.completed is not None
    assert str(update) == f"pytest-envtest:second update configmaps {namespace}/c -> 200"

    summary = api_calls.summary(namespace=namespace)
    assert "pytest-envtest:second" in summary and "pods/status" in summary
    first_line = summary.splitlines()[1].split()
    assert first_line == ["2", ADMIN, "create", "configmaps", namespace, "201"]  # most first


def test_failed_requests_are_counted_with_their_code(api_calls: ApiCalls, envtest: Cluster,
                                                     namespace: str) -> None:
    nobody = envtest.add_user("pytest-envtest:nobody").api_client()
    try:
        with pytest.raises(ApiException) as denied:
            kubernetes.client.CoreV1Api(nobody).create_namespaced_config_map(
                namespace, config_map("x"))
        assert denied.value.status == 403
    finally:
        nobody.close()
    calls = api_calls.calls(user="pytest-envtest:nobody")
    assert [(c.verb, c.resource, c.code, c.succeeded) for c in calls] == [
        ("create", "configmaps", 403, False)]
    assert api_calls.count(user="pytest-envtest:nobody", succeeded=True) == 0


def test_a_refusal_says_its_causes_a_terminating_namespace_apart_from_rbac(
        api_calls: ApiCalls, envtest: Cluster, k8s: Clients, namespace: str) -> None:
    """A create in a namespace being deleted is refused 403 whatever the role: exploration's
    forbidden oracle tells it apart from RBAC's 403 by the cause the audit log gives."""
    doomed = namespace_name("doomed")
    k8s.core.create_namespace({"metadata": {"name": doomed}})
    k8s.core.delete_namespace(doomed)
    with pytest.raises(ApiException) as refused:
        k8s.core.create_namespaced_config_map(doomed, config_map("late"))
    assert refused.value.status == 403
    nobody = envtest.add_user("pytest-envtest:nobody-else").api_client()
    try:
        with pytest.raises(ApiException):
            kubernetes.client.CoreV1Api(nobody).create_namespaced_config_map(
                namespace, config_map("x"))
    finally:
        nobody.close()
    (late,) = eventually(lambda: api_calls.calls(user=ADMIN, namespace=doomed,
                                                 verb="create", resource="configmaps"),
                         timeout=10)
    assert late.code == 403 and late.causes == ("NamespaceTerminating",)
    (denied,) = api_calls.calls(user="pytest-envtest:nobody-else")
    assert denied.code == 403 and denied.causes == ()


def test_time_window_by_mark_and_by_time(api_calls: ApiCalls, k8s: Clients,
                                         namespace: str) -> None:
    k8s.core.create_namespaced_config_map(namespace, config_map("setup"))
    start = api_calls.mark()
    k8s.core.create_namespaced_config_map(namespace, config_map("during"))
    end = api_calls.mark()
    k8s.core.create_namespaced_config_map(namespace, config_map("after"))

    def creates(**window: Any) -> int:
        return api_calls.count(verb="create", resource="configmaps", **window)

    assert creates() == 3  # the whole test
    assert creates(since=start) == 2
    assert creates(since=start, until=end) == 1
    assert creates(until=end) == 2
    moment = dt.datetime.now(dt.UTC)
    k8s.core.create_namespaced_config_map(namespace, config_map("later"))
    assert creates(since=moment) == 1
    assert creates(since=moment, until=start) == 0


@pytest.fixture
def earlier_call(envtest_session: Cluster) -> Iterator[str]:
    """A write made before this test's fixtures start counting (ordered before api_calls)."""
    user = "pytest-envtest:earlier"
    client = envtest_session.add_user(user, ("system:masters",)).api_client()
    core = kubernetes.client.CoreV1Api(client)
    name = namespace_name("earlier")
    core.create_namespaced_config_map("default", config_map(name))
    yield user
    core.delete_namespaced_config_map(name, "default")
    client.close()


def test_counts_only_calls_made_during_the_test(earlier_call: str, api_calls: ApiCalls,
                                                envtest: Cluster, namespace: str) -> None:
    assert envtest.audit_log.count(user=earlier_call) >= 1  # it is in the log...
    assert api_calls.count(user=earlier_call) == 0  # ...but before this test
    # This test's own namespace is the only namespace it created.
    created = api_calls.calls(verb="create", resource="namespaces")
    assert [(c.user, c.name) for c in created] == [(ADMIN, namespace)]


@pytest.mark.parametrize("round_", [1, 2])
def test_each_test_starts_from_zero(round_: int, api_calls: ApiCalls, k8s: Clients,
                                    namespace: str) -> None:
    k8s.core.create_namespaced_config_map(namespace, config_map("same-name"))
    assert api_calls.count(verb="create", resource="configmaps") == 1


def test_user_filter_takes_names_users_and_operator_handles(api_calls: ApiCalls, envtest: Cluster,
                                                            run_operator: Any, namespace: str,
                                                            k8s: Clients) -> None:
    def writer(api_client: kubernetes.client.ApiClient, stop: Any) -> None:
        kubernetes.client.CoreV1Api(api_client).create_namespaced_config_map(
            namespace, config_map("from-operator"))
        stop.wait()

    operator = run_operator(writer, name="writer")
    eventually(lambda: k8s.core.read_namespaced_config_map("from-operator", namespace))
    by_handle = api_calls.count(user=operator, verb="create", resource="configmaps")
    assert by_handle == 1
    assert api_calls.count(user=operator.user, verb="create", resource="configmaps") == 1
    assert api_calls.count(user=operator.user.name, verb="create", resource="configmaps") == 1
    assert api_calls.count(user=[operator, ADMIN], resource="configmaps") == 1
    with pytest.raises(TypeError, match="user= takes a user name"):
        api_calls.count(user=42)


def test_unknown_verbs_and_resources_are_refused_with_the_close_matches(
        api_calls: ApiCalls, widget_crd: str) -> None:
    with pytest.raises(ValueError, match="no resource 'widget'.*did you mean 'widgets'"):
        api_calls.count(resource="widget")
    with pytest.raises(ValueError, match="no verb 'updte'.*did you mean 'update'"):
        api_calls.count(verb=["create", "updte"])
    assert api_calls.count(resource="widgets") == 0  # a CRD's resource is known at once


def test_code_filter_and_failed_calls(api_calls: ApiCalls, k8s: Clients, namespace: str) -> None:
    k8s.core.create_namespaced_config_map(namespace, config_map("twice"))
    with pytest.raises(ApiException):
        k8s.core.create_namespaced_config_map(namespace, config_map("twice"))
    assert api_calls.count(verb="create", resource="configmaps") == 2  # failures count ...
    assert api_calls.count(verb="create", resource="configmaps", code=409) == 1
    assert api_calls.count(verb="create", resource="configmaps", code=[201, 409]) == 2
    assert api_calls.count(verb="create", resource="configmaps", succeeded=True) == 1


def test_the_apiservers_own_writes_are_left_out_unless_asked(make_control_plane: Any) -> None:
    """Right after a start (admin readiness), the apiserver is still writing its bootstrap RBAC:
    none of that is a test's work."""
    from envtest import ApiCalls as Calls

    own = make_control_plane(readiness="admin")
    since = own.audit_log.mark()
    own.wait_fully_ready()  # the bootstrap roles are written in the meantime
    calls = Calls(own.audit_log, since)
    assert calls.count(user="system:apiserver") > 0
    assert calls.count() == 0, calls.summary()
    assert "system:apiserver" not in calls.summary()
