"""Admission webhooks written in the test, served on loopback and called by the real apiserver."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from envtest import ResourceError, admission

GROUP = "webhooks.example.com"
GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {
                    "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                    "tier": {"type": "string"}}}}}},
        }],
    },
}


def _webhook(kind: str, name: str, path: str) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.{GROUP}",
            # As shipped by an operator: a Service the framework rewrites to its loopback URL.
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                         "path": path}},
            "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["gadgets"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
        }],
    }


def validate_replicas(request: dict) -> dict:
    spec = request["object"].get("spec") or {}
    if spec.get("minReplicas", 0) > spec.get("maxReplicas", 0):
        return admission.deny(f"minReplicas ({spec['minReplicas']}) must not exceed maxReplicas "
                    f"({spec['maxReplicas']})")
    return admission.allow()


def default_tier(request: dict) -> dict:
    if "tier" in (request["object"].get("spec") or {}):
        return admission.allow()
    return admission.patch([{"op": "add", "path": "/spec/tier", "value": "standard"}])


def gadget(name: str, **spec: object) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": name},
            "spec": spec}


@pytest.fixture
def gadget_webhooks(install_crds, webhooks):
    install_crds(GADGET_CRD)
    webhooks.route("/validate-gadget", validate_replicas)
    webhooks.route("/mutate-gadget", default_tier)
    webhooks.install(
        _webhook("ValidatingWebhookConfiguration", "gadget-validation", "/validate-gadget"),
        _webhook("MutatingWebhookConfiguration", "gadget-defaults", "/mutate-gadget"),
    )
    return webhooks


def test_validating_webhook_rejection_reaches_the_client(gadget_webhooks, k8s, namespace):
    with pytest.raises(ApiException) as rejected:
        k8s.custom.create_namespaced_custom_object(GROUP, "v1", namespace, "gadgets",
                                                   gadget("bad", minReplicas=5, maxReplicas=2))
    body = json.loads(rejected.value.body)
    assert rejected.value.status == 403
    assert "minReplicas (5) must not exceed maxReplicas (2)" in body["message"]
    assert 'admission webhook "gadget-validation.webhooks.example.com" denied' in body["message"]
    assert gadget_webhooks.calls("/validate-gadget")[-1].request["name"] == "bad"


def test_mutating_webhook_defaults_a_field(gadget_webhooks, k8s, namespace):
    created = k8s.custom.create_namespaced_custom_object(
        GROUP, "v1", namespace, "gadgets", gadget("good", minReplicas=1, maxReplicas=3))
    assert created["spec"]["tier"] == "standard"
    explicit = k8s.custom.create_namespaced_custom_object(
        GROUP, "v1", namespace, "gadgets",
        gadget("premium", minReplicas=1, maxReplicas=3, tier="premium"))
    assert explicit["spec"]["tier"] == "premium"
    operations = [c.request["operation"] for c in gadget_webhooks.calls("/mutate-gadget")]
    assert operations == ["CREATE", "CREATE"]


def test_webhook_configs_point_at_the_local_server(gadget_webhooks, k8s):
    config = k8s.admissionregistration.read_validating_webhook_configuration("gadget-validation")
    client_config = config.webhooks[0].client_config
    assert client_config.service is None
    assert client_config.url == gadget_webhooks.server.url("/validate-gadget")
    assert client_config.url.startswith("https://127.0.0.1:")
    assert client_config.ca_bundle  # the framework's CA for the loopback server


def test_a_webhook_without_a_handler_is_refused_before_install(webhooks):
    with pytest.raises(ResourceError, match="calls /nowhere, but the test's server has handlers"):
        webhooks.install(_webhook("ValidatingWebhookConfiguration", "lost", "/nowhere"))
