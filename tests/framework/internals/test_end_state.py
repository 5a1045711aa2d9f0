"""Exploration's end state knows Kubernetes' lists and what belongs to a control plane.

Checked on a real kube-apiserver: the order of a list it declares a map or a set (a
Service's ``spec.ports``, a CRD's ``x-kubernetes-list-type: map`` and ``set``) is no
difference; a list it declares nothing of (atomic) keeps its order, so a reordering there
still is one; the plane's own objects (``kube-root-ca.crt``) and its CA copied into an
object are never a difference between two planes; a difference is shown down to the list
element that differs, whole.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

from envtest import eventually
from envtest.api.explore import compare_end_states, snapshot_namespaces
from envtest.api.explore.oracles.listshapes import ListShapes

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "shelves.lists.example.com"},
    "spec": {"group": "lists.example.com", "scope": "Namespaced",
             "names": {"plural": "shelves", "singular": "shelf", "kind": "Shelf"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                     "type": "object", "properties": {
                         "books": {"type": "array", "x-kubernetes-list-type": "map",
                                   "x-kubernetes-list-map-keys": ["title"],
                                   "items": {"type": "object", "required": ["title"],
                                             "properties": {
                                                 "title": {"type": "string"},
                                                 "pages": {"type": "integer"}}}},
                         "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                  "items": {"type": "string"}},
                         "order": {"type": "array", "items": {"type": "string"}}}}}}}}]},
}


def _objects(namespace: str, books: list[dict[str, Any]], tags: list[str],
             order: list[str], ports: list[dict[str, Any]], ca: str = "") -> list[Any]:
    return [
        {"apiVersion": "lists.example.com/v1", "kind": "Shelf",
         "metadata": {"name": "shelf", "namespace": namespace},
         "spec": {"books": books, "tags": tags, "order": order}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "svc", "namespace": namespace},
         "spec": {"ports": ports, "clusterIP": "None", "selector": {"app": "x"}}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "copied-ca", "namespace": namespace}, "data": {"ca.crt": ca}},
    ]


def test_lists_declared_maps_or_sets_compare_without_order(install_crds: Any, apply: Any,
                                                           make_namespace: Any,
                                                           k8s: Any) -> None:
    install_crds(CRD)
    api = k8s.api_client
    # kube-apiserver publishes a new CRD's OpenAPI a moment after the CRD is served.
    eventually(lambda: ListShapes(api).of("lists.example.com", "v1", "Shelf"), timeout=20)
    first, second = make_namespace("end-state-a"), make_namespace("end-state-b")
    ca = open(api.configuration.ssl_ca_cert).read()
    a = {"name": "amqp", "port": 5672, "protocol": "TCP"}
    b = {"name": "management", "port": 15672, "protocol": "TCP"}
    apply(_objects(first, [{"title": "x", "pages": 1}, {"title": "y", "pages": 2}],
                    ["red", "blue"], ["one", "two"], [a, b], ca), namespace=first)
    apply(_objects(second, [{"title": "y", "pages": 2}, {"title": "x", "pages": 1}],
                    ["blue", "red"], ["one", "two"], [b, a], ca), namespace=second)
    one = snapshot_namespaces(api, [first])
    other = snapshot_namespaces(api, [second])
    assert compare_end_states(one, other) == []
    assert not any(key.startswith("configmaps kube-root-ca.crt") for key in one.objects)
    assert "<cluster-ca>" in str(one.objects["configmaps copied-ca"])

    # A list the apiserver declares nothing of keeps its order: a reordering is a difference,
    # shown down to the element that differs, whole.
    apply({"apiVersion": "lists.example.com/v1", "kind": "Shelf",
           "metadata": {"name": "shelf"}, "spec": {"order": ["two", "one"], "tags": ["red", "blue"],
                                                   "books": [{"title": "x", "pages": 1},
                                                             {"title": "y", "pages": 3}]}},
          namespace=second)
    changed = compare_end_states(one, snapshot_namespaces(api, [second]))
    assert changed == ["changed: shelves.lists.example.com shelf: spec.books[1].pages: 2 -> 3; "
                       "spec.order[0]: 'one' -> 'two'; spec.order[1]: 'two' -> 'one'"], changed


OPEN_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "members.open.example.com"},
    "spec": {"group": "open.example.com", "scope": "Namespaced",
             "names": {"plural": "members", "singular": "member", "kind": "Member"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def test_conditions_are_keyed_by_type_and_a_status_list_of_names_is_a_set(
        install_crds: Any, apply: Any, make_namespace: Any, k8s: Any) -> None:
    """A CRD whose schema is open declares no list type: its status.conditions came back in
    another order after a restart and was read as a difference, with a blank text (the
    conditions, matched by type, were the same); an order-only change of
    ``status.members.ready`` was flaky.  Kubernetes' conventions key conditions by type; a
    status list of plain values is what the operator found, in the order it found it."""
    install_crds(OPEN_CRD)
    api = k8s.api_client
    ready, progressing = ({"type": "Ready", "status": "True"},
                          {"type": "Progressing", "status": "False"})
    states = []
    for hint, conditions, members, spec_order in (
            ("open-a", [ready, progressing], ["zk-0", "zk-1"], ["x", "y"]),
            ("open-b", [progressing, ready], ["zk-1", "zk-0"], ["x", "y"]),
            ("open-c", [progressing, ready], ["zk-1", "zk-0"], ["y", "x"])):
        namespace = make_namespace(hint)
        apply({"apiVersion": "open.example.com/v1", "kind": "Member",
               "metadata": {"name": "m"}, "spec": {"order": spec_order}}, namespace=namespace)
        k8s.custom.patch_namespaced_custom_object_status(
            "open.example.com", "v1", namespace, "members", "m",
            {"status": {"conditions": conditions, "members": {"ready": members}}})
        states.append(snapshot_namespaces(api, [namespace]))
    assert compare_end_states(states[0], states[1]) == []
    # The desired state's own list keeps its order, and the difference says what differs.
    assert compare_end_states(states[1], states[2]) == [
        "changed: members.open.example.com m: spec.order[0]: 'x' -> 'y'; "
        "spec.order[1]: 'y' -> 'x'"]


def test_a_difference_is_never_blank() -> None:
    """Items matched by name (here, in a list no schema declares) that are the same but in
    another order are still a difference where the list's order counts: it says so."""
    from envtest.api.explore.oracles.endstate import EndState

    one = EndState({"widgets.example.com w": [{"spec": {"steps": [{"name": "a"},
                                                                  {"name": "b"}]}}]})
    other = EndState({"widgets.example.com w": [{"spec": {"steps": [{"name": "b"},
                                                                    {"name": "a"}]}}]})
    [line] = compare_end_states(one, other)
    assert line == ("changed: widgets.example.com w: spec.steps: the same items in another "
                    "order: ['a', 'b'] -> ['b', 'a']"), line


@pytest.mark.envtest_profile("cluster")
def test_fields_only_the_cluster_manages_are_left_out(make_namespace: Any, k8s: Any,
                                                      envtest: Any) -> None:
    """An operator that made its Deployment and then changed it, and one that made it in its
    final form at once (a retry after a 500), reach the same state by two paths:
    kube-controller-manager's revision annotation ('2' and '1'), the status's
    observedGeneration and the ReplicaSets it keeps are the path, not the operator's state.
    managedFields say who set each field: those only the cluster's components set are left
    out, whole objects they alone made too."""
    operator = envtest.add_user("pytest-envtest:deployer", ("system:masters",))
    apps = kubernetes.client.AppsV1Api(operator.api_client())

    def deployment(image: str) -> dict[str, Any]:
        labels = {"app": "web"}
        return {"metadata": {"name": "web", "labels": labels}, "spec": {
            "replicas": 1, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "c", "image": image}]}}}}

    changed, direct = make_namespace("by-two-steps"), make_namespace("at-once")
    apps.create_namespaced_deployment(changed, deployment("web:1"))
    eventually(lambda: k8s.apps.read_namespaced_deployment("web", changed).status
               .observed_generation == 1, timeout=30)
    apps.patch_namespaced_deployment("web", changed, deployment("web:2"))
    apps.create_namespaced_deployment(direct, deployment("web:2"))

    def settled(namespace: str, revision: str) -> bool:
        found = k8s.apps.read_namespaced_deployment("web", namespace)
        return (found.metadata.annotations or {}).get(
            "deployment.kubernetes.io/revision") == revision and \
            found.status.observed_generation == found.metadata.generation

    eventually(lambda: settled(changed, "2") and settled(direct, "1"), timeout=30)
    one, other = snapshot_namespaces(k8s.api_client, [changed]), \
        snapshot_namespaces(k8s.api_client, [direct])
    assert compare_end_states(one, other) == []
    assert "deployments.apps web" in one.objects
    assert not any(key.startswith(("replicasets.apps", "pods ")) for key in one.objects)
    web = one.objects["deployments.apps web"][0]
    assert "status" not in web and "deployment.kubernetes.io/revision" not in str(web), web
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2"
