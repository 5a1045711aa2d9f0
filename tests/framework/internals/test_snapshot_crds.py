"""What a snapshot keeps of CRDs: not the framework's own conversion probe, and a CRD whose
conversion webhook was the test's (a loopback server gone with the test) comes back
converting by apiVersion alone, with the restore saying so."""

from __future__ import annotations

import uuid
from typing import Any

from envtest.api.objects.rest import request
from envtest.api.snapshots.export import FRAMEWORK_GROUP
from envtest.api.snapshots.restore import restore_objects


def two_version_crd(group: str, strategy: dict[str, Any]) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}", "uid": "old-uid", "resourceVersion": "9"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema},
                              {"name": "v2", "served": True, "storage": False,
                               "schema": schema}],
                 "conversion": strategy},
    }


def test_a_dead_conversion_webhook_is_not_restored_and_the_probe_crd_is_skipped(
        k8s: Any, namespace: str) -> None:
    group = f"restore-{uuid.uuid4().hex[:8]}.example.com"
    webhook = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:9/convert", "caBundle": ""}}}
    probe = two_version_crd(FRAMEWORK_GROUP, {"strategy": "None"})
    gadget = {"apiVersion": f"{group}/v1", "kind": "Gadget",
              "metadata": {"name": "g", "namespace": namespace, "uid": "u-1"},
              "spec": {"size": 3}}
    result = restore_objects(k8s.api_client, [two_version_crd(group, webhook), probe, gadget],
                             timeout=30)
    try:
        assert result.crds == [f"gadgets.{group}"], result.crds  # not the framework's probe
        crd = request(k8s.api_client, "GET", "/apis/apiextensions.k8s.io/v1/"
                      f"customresourcedefinitions/gadgets.{group}")
        assert crd["spec"]["conversion"] == {"strategy": "None"}
        assert any("conversion webhook was the test's and is not restored" in p
                   for p in result.problems), result.problems
        # Readable in both versions: with the dead webhook, v2 would fail.
        for version in ("v1", "v2"):
            got = request(k8s.api_client, "GET",
                          f"/apis/{group}/{version}/namespaces/{namespace}/gadgets/g")
            assert got["spec"] == {"size": 3}
    finally:
        request(k8s.api_client, "DELETE",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{group}")
