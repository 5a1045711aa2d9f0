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

from envtest import eventually
from envtest.api.explore import compare_end_states, snapshot_namespaces
from envtest.api.explore.listshapes import ListShapes

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
