"""A snapshot's placeholders: no secret value left in any field, each Secret type still valid.

The objects are put through ``with_placeholders`` as the export does, then restored into the
test's namespace on the real apiserver, which validates every Secret type's content: the
placeholders must be accepted where a value was (``.dockerconfigjson`` must be JSON, a TLS
Secret needs both keys, a token Secret names its ServiceAccount).
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from typing import Any

import pytest

from envtest.api.explore import compare_end_states, snapshot_namespaces
from envtest.api.snapshots.placeholders import parse_secret_mode, with_placeholders
from envtest.api.snapshots.restore import restore_objects
from envtest.errors import ConfigurationError
from envtest.system.redaction import redact_text

LAST = "kubectl.kubernetes.io/last-applied-configuration"
MARKER = re.compile(r"<redacted [0-9a-f]{12}>")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, namespace: str, data: dict[str, str], kind: str = "Opaque",
           **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": kind,
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                         **metadata},
            "data": {key: b64(value) for key, value in data.items()}}


def test_every_secret_value_becomes_a_placeholder_the_apiserver_accepts(
        k8s: Any, namespace: str) -> None:
    decoy = f"decoy-{secrets.token_hex(10)}"
    applied = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "applied"},
               "stringData": {"password": decoy}}
    objects = [
        secret("plain", namespace, {"password": decoy}),
        secret("twin", namespace, {"other-key": decoy}),
        secret("different", namespace, {"password": decoy + "-2"}),
        secret("pull", namespace, {".dockerconfigjson": json.dumps(
            {"auths": {"r.example": {"auth": b64(f"u:{decoy}")}}})},
            "kubernetes.io/dockerconfigjson"),
        secret("legacy-pull", namespace, {".dockercfg": json.dumps(
            {"r.example": {"auth": b64(f"u:{decoy}")}})}, "kubernetes.io/dockercfg"),
        secret("tls", namespace, {"tls.crt": "CERT " + decoy, "tls.key": "KEY " + decoy},
               "kubernetes.io/tls"),
        secret("basic", namespace, {"username": "app", "password": decoy},
               "kubernetes.io/basic-auth"),
        secret("token", namespace, {"token": decoy, "namespace": namespace},
               "kubernetes.io/service-account-token",
               annotations={"kubernetes.io/service-account.name": "default"}),
        secret("applied", namespace, {"password": decoy}, annotations={LAST: json.dumps(applied)}),
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "copy", "namespace": namespace, "annotations": {"a/b": decoy}},
         "data": {"dsn": f"postgres://app:{decoy}@db/app", "plain": "nothing secret"}},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "web", "namespace": namespace},
         "spec": {"containers": [{"name": "c", "image": "nginx", "env": [
             {"name": "MODE", "value": "fast"}, {"name": "PASSWORD", "value": decoy}]}]}},
    ]
    # The ConfigMap comes first: the Secrets' values are learnt before any object is masked.
    objects.insert(0, objects.pop(-2))
    masked, replaced = with_placeholders(objects)
    # A token Secret's namespace and CA are no secret: reports keep showing the namespace.
    assert redact_text(f"in {namespace}") == f"in {namespace}"

    text = json.dumps(masked)
    for form in (decoy, b64(decoy), b64(f"u:{decoy}")):
        assert form not in text, form
    assert objects[1]["data"]["password"] == b64(decoy), "the objects given are left as they were"
    by_name = {o["metadata"]["name"]: o for o in masked}
    marker = base64.b64decode(by_name["plain"]["data"]["password"]).decode()
    assert MARKER.fullmatch(marker), marker
    assert by_name["twin"]["data"]["other-key"] == by_name["plain"]["data"]["password"]
    assert by_name["different"]["data"]["password"] != by_name["plain"]["data"]["password"]
    pull = json.loads(base64.b64decode(by_name["pull"]["data"][".dockerconfigjson"]))
    assert list(pull) == ["auths"] and MARKER.fullmatch(next(iter(pull["auths"])))
    inside = json.loads(by_name["applied"]["metadata"]["annotations"][LAST])
    assert MARKER.fullmatch(inside["stringData"]["password"]), inside
    assert by_name["copy"]["data"] == {"dsn": "postgres://app:<redacted>@db/app",
                                       "plain": "nothing secret"}
    env = by_name["web"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "MODE", "value": "fast"}, {"name": "PASSWORD", "value": "<redacted>"}]
    assert replaced[f"Secret {namespace}/plain"] == ["data.password"]
    assert replaced[f"Secret {namespace}/pull"] == ["data[.dockerconfigjson]"]
    assert replaced[f"ConfigMap {namespace}/copy"] == ["metadata.annotations[a/b]", "data.dsn"]
    assert replaced[f"Pod {namespace}/web"] == ["spec.containers[0].env[1].value"]
    assert replaced[f"Secret {namespace}/applied"] == [
        "data.password", f"metadata.annotations[{LAST}]: stringData.password"]

    result = restore_objects(k8s.api_client, [o for o in masked if o["kind"] != "Pod"],
                             timeout=30)
    assert result.problems == [], result.problems
    restored = k8s.core.read_namespaced_secret("plain", namespace)
    assert base64.b64decode(restored.data["password"]).decode() == marker
    for name in ("pull", "legacy-pull", "tls", "basic"):
        assert k8s.core.read_namespaced_secret(name, namespace).data, name
    token = k8s.core.read_namespaced_secret("token", namespace)
    assert not token.data, "a placeholder token authenticates nobody: left to the controller"


def test_the_mode_is_placeholders_or_keep() -> None:
    assert parse_secret_mode(None) == parse_secret_mode("") == "placeholders"
    assert parse_secret_mode(" KEEP ") == "keep"
    with pytest.raises(ConfigurationError, match=r"--envtest-snapshot-secrets=clear: choose "
                       r"placeholders \(the default: no Secret value in a snapshot, safe to "
                       r"upload\) or keep"):
        parse_secret_mode("clear")


def test_the_end_state_exploration_compares_holds_digests_not_values(
        k8s: Any, namespace: str) -> None:
    """Exploration prints the end state's differences: a Secret whose value differs between
    two runs shows as two digests, never as the values."""
    states = []
    for run in ("clean", "faulted"):
        value = f"{run}-{secrets.token_hex(8)}"
        k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "token"},
                                                      "stringData": {"token": value}})
        states.append((value, snapshot_namespaces(k8s.api_client, [namespace])))
        k8s.core.delete_namespaced_secret("token", namespace)
    [line] = compare_end_states(states[0][1], states[1][1])
    assert line.startswith("changed: secrets token: data.token: '<redacted "), line
    for value, _ in states:
        assert value not in line and b64(value) not in line, line
