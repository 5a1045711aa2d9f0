"""The watch that teaches the redactor every Secret of a cluster: a value made, rotated away
or deleted after it started is known; a user that may not list Secrets starts none."""

from __future__ import annotations

import base64
import secrets
import time
from typing import Any

import kubernetes

from envtest import REDACTED, eventually, redact_text
from envtest.api.observe.secret_watch import SecretWatch


def test_a_value_rotated_away_and_a_deleted_secrets_are_learnt(envtest_session: Any,
                                                               make_namespace: Any) -> None:
    namespace = make_namespace("secret-watch")
    first, second = (f"watched-{secrets.token_hex(6)}" for _ in range(2))
    watch = SecretWatch(envtest_session.api_client()).start()
    try:
        assert watch.unavailable == ""
        core = kubernetes.client.CoreV1Api(envtest_session.api_client())
        core.create_namespaced_secret(namespace, {"metadata": {"name": "s"},
                                                  "stringData": {"v": first}})
        core.patch_namespaced_secret("s", namespace, {"stringData": {"v": second}})
        core.delete_namespaced_secret("s", namespace)
        for value in (first, second):
            encoded = base64.b64encode(value.encode()).decode()
            eventually(lambda v=value, e=encoded: redact_text(f"{v} {e}")
                       == f"{REDACTED} {REDACTED}", timeout=10)
    finally:
        watch.stop()


def test_a_user_that_may_not_list_secrets_starts_no_watch(envtest_session: Any) -> None:
    """An existing cluster's user with RBAC of its own: no watch retrying a 403 forever, no
    10 s wait for a listing that never comes."""
    user = envtest_session.add_user(f"no-rights-{secrets.token_hex(3)}", ())
    client = user.api_client()
    started = time.monotonic()
    try:
        watch = SecretWatch(client).start()
        assert watch.unavailable == "cannot list Secrets in every namespace (403)"
        assert time.monotonic() - started < 5
        watch.stop()
    finally:
        client.close()
