"""One redactor for everything the framework prints: no Secret value in a timeout or a report."""

from __future__ import annotations

import base64
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envtest import REDACTED, Redactor, WaitTimeoutError, redact_object, redact_text

KUBECTL = Path(sys.executable).parent / "kubectl"


def _secret_manifest(name: str, value: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                           "stringData": {"password": value}})


def test_a_wait_for_timeout_on_a_kubectl_applied_secret_shows_no_value(
        kubeconfig: Path, namespace: str, wait_for, tmp_path: Path) -> None:
    value = f"s3cr3t-{secrets.token_hex(8)}"
    manifest = tmp_path / "secret.yaml"
    manifest.write_text(_secret_manifest("applied", value))
    # kubectl apply (client side) keeps the whole manifest, the value included, in the
    # kubectl.kubernetes.io/last-applied-configuration annotation.
    applied = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "-n", namespace,
                              "apply", "-f", str(manifest)], capture_output=True, text=True,
                             timeout=60)
    assert applied.returncode == 0, applied.stderr
    with pytest.raises(WaitTimeoutError) as timeout:
        wait_for("Secret", "applied", lambda secret: False, timeout=0.3)
    message = str(timeout.value)
    assert "last-applied-configuration" in message and REDACTED in message
    for shown in (value, base64.b64encode(value.encode()).decode()):
        assert shown not in message


def test_objects_lose_secret_values_and_the_last_applied_manifest_of_any_kind() -> None:
    secret = {"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dmFsdWU="},
              "stringData": {"p": "plain"}}
    config = {"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": '{"data": {"token": "x"}}',
        "owner": "team-a"}}, "data": {"shown": "yes"}}
    assert redact_object(secret)["data"] == {"k": REDACTED}
    assert redact_object(secret)["stringData"] == {"p": REDACTED}
    shown = redact_object(config)
    assert shown["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/last-applied-configuration": REDACTED, "owner": "team-a"}
    assert shown["data"] == {"shown": "yes"}
    assert secret["data"] == {"k": "dmFsdWU="}, "the caller's object is not changed"


def test_texts_lose_keys_tokens_and_the_values_of_secrets_seen() -> None:
    redactor = Redactor()
    encoded = base64.b64encode(b"hunter2-password").decode()
    redactor.object({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": encoded},
                     "stringData": {"api": "token-1234567"}})
    log = ("connecting with hunter2-password\n"
           f"raw {encoded}\n"
           "header Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig\n"
           "client-key-data: LS0tLS1CRUdJTi\n"
           "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----\n"
           "calling with token-1234567 and dG9rZW4tMTIzNDU2Nw==\n"
           "replicas: 3")
    text = redactor.text(log)
    for leaked in ("hunter2-password", encoded, "eyJhbGciOiJSUzI1NiJ9", "LS0tLS1CRUdJTi",
                   "MHcCAQEEIB", "PRIVATE KEY", "token-1234567", "dG9rZW4tMTIzNDU2Nw=="):
        assert leaked not in text, leaked
    assert "replicas: 3" in text, "ordinary text stays readable"
    # Without having seen the Secret, keys and tokens still go; unknown values cannot.
    assert "PRIVATE KEY" not in redact_text(log)


def test_a_secret_value_made_of_words_stays_in_logs_unless_its_key_names_a_secret() -> None:
    """Every value of every Secret was scrubbed: a Secret's ``provider: rabbitmq`` turned
    ``github.com/rabbitmq/cluster-operator`` into ``github.com/<redacted>/cluster-operator``
    in every log line.  The rule (``scrubbed_from_text``), both ways."""
    redactor = Redactor()
    words = {"provider": "rabbitmq", "type": "rabbitmq", "username": "guest-user",
             "host": "rabbitmq.default.svc"}
    secrets_ = {"password": "changeme", "tls.key": "plainwords", "api-token": "letters",
                "value": "s3cr3t-v4lue", "note": "a" * 24, "blob": "x9/Yz+Qw=="}
    encoded = {"provider": base64.b64encode(b"rabbitmq").decode(),
               "db-password": base64.b64encode(b"hunterhunter").decode()}
    redactor.object({"kind": "Secret", "metadata": {"name": "s"},
                     "stringData": {**words, **secrets_}, "data": encoded})
    log = ("loading github.com/rabbitmq/cluster-operator/v2 for guest-user at "
           "rabbitmq.default.svc; password changeme, key plainwords, token letters, "
           f"value s3cr3t-v4lue, note {'a' * 24}, blob x9/Yz+Qw==, db hunterhunter, "
           f"raw {encoded['db-password']}")
    text = redactor.text(log)
    assert "github.com/rabbitmq/cluster-operator/v2 for guest-user at rabbitmq.default.svc" \
        in text, text
    for leaked in ("changeme", "plainwords", "letters", "s3cr3t-v4lue", "a" * 24,
                   "x9/Yz+Qw==", "hunterhunter", encoded["db-password"]):
        assert leaked not in text, (leaked, text)
    # The Secret itself is masked whole, words or not.
    shown = redactor.object({"kind": "Secret", "metadata": {"name": "s"},
                             "stringData": words})
    assert set(shown["stringData"].values()) == {REDACTED}
