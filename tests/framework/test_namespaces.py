"""Namespaces that are really gone, finalizers and all, with no namespace controller running."""

from __future__ import annotations

import textwrap

import pytest
from framework_helpers import WIDGET_CRD, pod_body, widget
from kubernetes.client.rest import ApiException

from envtest import (
    Clients,
    NamespaceReaper,
    create_namespace,
    delete_namespace,
    namespace_name,
    set_pod_running,
)

pytest_plugins = ["pytester"]

FINALIZER = "example.com/keep"


def fill(k8s: Clients, namespace: str) -> None:
    """Objects of several kinds, three of them held by finalizers nobody will remove."""
    core = k8s.core
    core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": [FINALIZER]}, "data": {"k": "v"}})
    core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "free"}})
    core.create_namespaced_secret(namespace, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "stringData": {"a": "b"}})
    core.create_namespaced_service(namespace, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
        "spec": {"ports": [{"port": 80}]}})
    pod = pod_body("runner")
    pod["metadata"]["finalizers"] = [FINALIZER]
    pod["spec"]["nodeName"] = "node-1"  # bound to a node, as a scheduled Pod would be
    core.create_namespaced_pod(namespace, pod)
    set_pod_running(k8s.api_client, "runner", namespace)
    k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets",
                                               widget("held", finalizers=[FINALIZER]))


def leftovers(k8s: Clients, namespace: str) -> dict[str, list[str]]:
    """What etcd still holds for the namespace, from cluster-wide lists (no namespace needed)."""
    selector = f"metadata.namespace={namespace}"
    found = {
        "configmaps": k8s.core.list_config_map_for_all_namespaces(field_selector=selector).items,
        "secrets": k8s.core.list_secret_for_all_namespaces(field_selector=selector).items,
        "services": k8s.core.list_service_for_all_namespaces(field_selector=selector).items,
        "pods": k8s.core.list_pod_for_all_namespaces(field_selector=selector).items,
    }
    names = {kind: [i.metadata.name for i in items] for kind, items in found.items()}
    widgets = k8s.custom.list_cluster_custom_object("example.com", "v1", "widgets",
                                                    field_selector=selector)["items"]
    names["widgets"] = [w["metadata"]["name"] for w in widgets]
    return {kind: items for kind, items in names.items() if items}


def namespace_status(k8s: Clients, name: str) -> int:
    try:
        k8s.core.read_namespace(name)
    except ApiException as exc:
        return exc.status
    return 200


def test_delete_namespace_removes_everything_including_finalized_objects(
        widget_crd: str, k8s: Clients) -> None:
    name = namespace_name("delete-with-finalizers")
    create_namespace(k8s.api_client, name)
    fill(k8s, name)
    assert set(leftovers(k8s, name)) == {"configmaps", "secrets", "services", "pods", "widgets"}

    stuck = delete_namespace(k8s.api_client, name, timeout=30)

    assert sorted(stuck) == ["configmaps/held", "pods/runner", "widgets/held"]
    assert namespace_status(k8s, name) == 404
    assert leftovers(k8s, name) == {}


def test_delete_namespace_of_a_missing_namespace_is_a_no_op(k8s: Clients) -> None:
    assert delete_namespace(k8s.api_client, namespace_name("never-created")) == []


def test_reaper_closes_the_namespace_at_once_and_removes_it_in_the_background(
        widget_crd: str, k8s: Clients) -> None:
    name = namespace_name("reaped")
    create_namespace(k8s.api_client, name)
    fill(k8s, name)
    reaper = NamespaceReaper(k8s.api_client, timeout=30)
    try:
        reaper.reap(name)
        with pytest.raises(ApiException) as refused:  # terminating: no new objects
            k8s.core.create_namespaced_config_map(name, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})
        assert refused.value.status == 403
        assert "is being terminated" in refused.value.body
        reaper.wait(name)
    finally:
        errors = reaper.close()
    assert errors == []
    assert namespace_status(k8s, name) == 404
    assert leftovers(k8s, name) == {}


@pytest.mark.parametrize("hint", [
    "test_x[param-with/slash and spaces]",
    "Test_UPPER::case" + "x" * 120,
    "---",
])
def test_namespace_names_are_valid_and_unique(hint: str, k8s: Clients) -> None:
    names = {namespace_name(hint) for _ in range(5)}
    assert len(names) == 5
    for name in names:
        assert len(name) <= 63
    name = names.pop()
    create_namespace(k8s.api_client, name, labels={"purpose": "naming"})  # the server agrees
    try:
        labels = k8s.core.read_namespace(name).metadata.labels
        assert labels["pytest-envtest/managed"] == "true" and labels["purpose"] == "naming"
    finally:
        delete_namespace(k8s.api_client, name)


def test_namespace_fixture_cleanup_really_removes_the_namespace(
        inner_pytester: pytest.Pytester) -> None:
    inner_pytester.makeconftest(f"WIDGET_CRD = {WIDGET_CRD!r}\n")
    inner_pytester.makepyfile(test_inner=textwrap.dedent(f"""
        import json
        from pathlib import Path

        from conftest import WIDGET_CRD
        from envtest import eventually

        RECORD = Path("namespaces.json")


        def test_a_fills_its_namespace(namespace, k8s, install_crds):
            install_crds(WIDGET_CRD)
            k8s.core.create_namespaced_config_map(namespace, {{
                "metadata": {{"name": "held", "finalizers": ["{FINALIZER}"]}}}})
            k8s.core.create_namespaced_pod(namespace, {{
                "metadata": {{"name": "p", "finalizers": ["{FINALIZER}"]}},
                "spec": {{"containers": [{{"name": "c", "image": "x"}}]}}}})
            k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace,
                "widgets", {{"apiVersion": "example.com/v1", "kind": "Widget",
                            "metadata": {{"name": "w", "finalizers": ["{FINALIZER}"]}}}})
            RECORD.write_text(json.dumps([namespace]))


        def test_b_finds_it_gone(k8s):
            name = json.loads(RECORD.read_text())[0]

            def gone():
                try:
                    k8s.core.read_namespace(name)
                except Exception as exc:
                    return getattr(exc, "status", None) == 404
                return False

            eventually(gone, timeout=30)
            selector = "metadata.namespace=" + name
            assert k8s.core.list_config_map_for_all_namespaces(
                field_selector=selector).items == []
            assert k8s.core.list_pod_for_all_namespaces(field_selector=selector).items == []
            assert k8s.custom.list_cluster_custom_object(
                "example.com", "v1", "widgets", field_selector=selector)["items"] == []
    """))
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2)
    assert "namespace cleanup" not in result.stdout.str()  # the reaper reported no errors


def test_make_namespace_gives_more_namespaces_cleaned_up_like_the_first(
        make_namespace, namespace, k8s, envtest_diagnostics) -> None:
    second = make_namespace("second")
    assert second != namespace and second.startswith("second-")
    assert k8s.core.read_namespace(second).status.phase == "Active"
    # Both are the test's: a failure report shows the objects and events of each.
    titles = list(envtest_diagnostics())
    assert [t for t in titles if t.startswith("objects in namespace")] == [
        f"objects in namespace {namespace}", f"objects in namespace {second}"]


def test_a_sweep_told_what_was_written_deletes_only_those_collections(
        widget_crd: str, k8s: Clients, envtest) -> None:
    """The audit log's ``resources_written`` narrows the sweep to the kinds the namespace
    ever held: the sweeper's own calls in the same log show which collections it deleted."""
    name = namespace_name("told-what-was-written")
    create_namespace(k8s.api_client, name)
    fill(k8s, name)
    sweeper = envtest.add_user("told-sweeper", ["system:masters"]).api_client()
    written = envtest.audit_log.resources_written(name)
    assert {("", "configmaps"), ("", "secrets"), ("", "services"), ("", "pods"),
            ("example.com", "widgets")} <= written

    stuck = delete_namespace(sweeper, name, timeout=30, written=envtest.audit_log.resources_written)

    assert sorted(stuck) == ["configmaps/held", "pods/runner", "widgets/held"]
    assert namespace_status(k8s, name) == 404
    assert leftovers(k8s, name) == {}
    swept = {(c.api_group, c.resource)
             for c in envtest.audit_log.calls(user="told-sweeper", verb="deletecollection")}
    assert swept == written  # nothing else: a full sweep deletes 25 and more collections


def test_a_kind_written_after_the_first_look_is_swept_by_the_second(
        widget_crd: str, k8s: Clients, envtest) -> None:
    """A write that reached the log after the sweep's first look (one racing the namespace's
    deletion) is swept by its second look: here the first look is told of no Secret."""
    name = namespace_name("late-write")
    create_namespace(k8s.api_client, name)
    fill(k8s, name)
    looks: list[set[tuple[str, str]]] = []

    def written_late(namespace: str) -> set[tuple[str, str]]:
        found = envtest.audit_log.resources_written(namespace)
        looks.append(found - {("", "secrets")} if not looks else found)
        return looks[-1]

    delete_namespace(k8s.api_client, name, timeout=30, written=written_late)

    assert ("", "secrets") not in looks[0] and ("", "secrets") in looks[1]
    assert leftovers(k8s, name) == {}


def test_a_sweep_whose_log_cannot_tell_deletes_every_collection(
        widget_crd: str, k8s: Clients, envtest) -> None:
    name = namespace_name("log-cannot-tell")
    create_namespace(k8s.api_client, name)
    fill(k8s, name)
    sweeper = envtest.add_user("blind-sweeper", ["system:masters"]).api_client()

    def no_log(namespace: str) -> set[tuple[str, str]]:
        raise OSError("no space left on device")

    delete_namespace(sweeper, name, timeout=30, written=no_log)

    assert leftovers(k8s, name) == {}
    swept = envtest.audit_log.calls(user="blind-sweeper", verb="deletecollection")
    assert len({(c.api_group, c.resource) for c in swept}) > 20
