"""Webhooks the operator serves itself (Go envtest's WebhookInstallOptions): run_operator hands
a command a certificate, a port and a host, waits until it answers, and points the apiserver at
it; here the operator is a small Python script (http.server + ssl on the handed certificate)."""

from __future__ import annotations

import json
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from envtest import ConfigurationError, WaitTimeoutError

GROUP = "opwebhooks.example.com"
OPERATOR = [sys.executable, str(Path(__file__).parent / "data" / "webhook_operator.py"),
            "--cert-dir", "{webhook_cert_dir}", "--port", "{webhook_port}",
            "--host", "{webhook_host}"]


def _version(name: str, fields: dict[str, Any], storage: bool) -> dict[str, Any]:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": fields}}}}}


GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            _version("v1alpha1", {"size": {"type": "string"}, "tier": {"type": "string"}},
                     storage=False),
            _version("v1", {"replicas": {"type": "integer"}, "minReplicas": {"type": "integer"},
                            "maxReplicas": {"type": "integer"}, "tier": {"type": "string"}},
                     storage=True),
        ],
        # As kubebuilder's config/crd/patches/webhook_in_gadgets.yaml makes it.
        "conversion": {"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                         "path": "/convert"}},
            "conversionReviewVersions": ["v1"]}},
    },
}


def webhook_config(kind: str, name: str, path: str) -> dict[str, Any]:
    """As controller-gen writes config/webhook/manifests.yaml."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [{
            "name": f"{name}.{GROUP}",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                         "path": path}},
            "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1", "v1alpha1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["gadgets"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail",
        }],
    }


MANIFESTS = [webhook_config("ValidatingWebhookConfiguration", "gadget-operator-validation",
                            "/validate-gadget"),
             webhook_config("MutatingWebhookConfiguration", "gadget-operator-defaults",
                            "/mutate-gadget"),
             GADGET_CRD]


def gadget(version: str, name: str, **spec: object) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget", "metadata": {"name": name},
            "spec": spec}


def test_the_apiserver_calls_the_operators_own_webhooks(run_operator, k8s, namespace):
    operator = run_operator(OPERATOR, webhooks=MANIFESTS)
    custom = k8s.custom

    with pytest.raises(ApiException) as denied:
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, "gadgets",
                                               gadget("v1", "bad", minReplicas=5, maxReplicas=2))
    assert "the operator says: minReplicas must not exceed maxReplicas" in json.loads(
        denied.value.body)["message"]

    created = custom.create_namespaced_custom_object(GROUP, "v1", namespace, "gadgets",
                                                     gadget("v1", "good", replicas=2))
    assert created["spec"]["tier"] == "operator-default"

    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "gadgets",
                                           gadget("v1alpha1", "old", size="3"))
    old = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "gadgets", "old")
    assert old["spec"] == {"replicas": 3, "tier": "operator-default"}
    good = custom.get_namespaced_custom_object(GROUP, "v1alpha1", namespace, "gadgets", "good")
    assert good["spec"] == {"size": "2", "tier": "operator-default"}

    served = operator.webhooks
    assert {line.split(": ")[0] for line in operator.logs().splitlines()
            if line.startswith("served ")} >= {"served /validate-gadget",
                                              "served /mutate-gadget", "served /convert"}
    config = k8s.admissionregistration.read_validating_webhook_configuration(
        "gadget-operator-validation")
    assert config.webhooks[0].client_config.url == \
        f"https://127.0.0.1:{served.port}/validate-gadget"
    crd = k8s.apiextensions.read_custom_resource_definition(f"gadgets.{GROUP}")
    assert crd.spec.conversion.webhook.client_config.url == \
        f"https://127.0.0.1:{served.port}/convert"


def test_the_operator_gets_a_certificate_port_and_host(run_operator):
    operator = run_operator(OPERATOR, webhooks=MANIFESTS[:1])
    served = operator.webhooks
    assert (served.host, served.answered_after is not None) == ("127.0.0.1", True)
    assert sorted(p.name for p in served.cert_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert stat.S_IMODE(served.cert_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((served.cert_dir / "tls.key").stat().st_mode) == 0o600
    environment = next(json.loads(line.split(" ", 1)[1]) for line in
                       operator.logs().splitlines() if line.startswith("environment "))
    assert environment == {"WEBHOOK_CERT_DIR": str(served.cert_dir),
                           "WEBHOOK_HOST": "127.0.0.1", "WEBHOOK_PORT": str(served.port)}


def test_an_operator_whose_webhooks_never_answer_fails_with_its_log_tail(run_operator):
    with pytest.raises(WaitTimeoutError) as never:
        run_operator([*OPERATOR, "--never-serve"], webhooks=MANIFESTS[:1], webhook_timeout=2)
    message = str(never.value)
    assert "operator 'operator' did not serve its webhooks at https://127.0.0.1:" in message
    assert "/validate-gadget: no answer (Connection refused)" in message
    assert "starting, but this one never serves its webhooks" in message  # its log tail


def test_a_path_the_operator_does_not_serve_is_named(run_operator):
    lost = webhook_config("ValidatingWebhookConfiguration", "gadget-operator-lost", "/elsewhere")
    with pytest.raises(WaitTimeoutError, match=r"/elsewhere: HTTP 404: nothing served at "
                                               r"/elsewhere"):
        run_operator(OPERATOR, webhooks=[lost], webhook_timeout=2)


def test_webhooks_are_for_commands(run_operator):
    def function_operator(api_client: Any, stop: threading.Event) -> None:
        stop.wait()

    with pytest.raises(ConfigurationError, match="serve them in the test with the webhooks "
                                                 "fixture"):
        run_operator(function_operator, webhooks=MANIFESTS[:1])
