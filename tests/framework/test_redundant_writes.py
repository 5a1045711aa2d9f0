"""Redundant writes, judged from the audit log: updates kube-apiserver did not store."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import kubernetes.client
import pytest
from framework_helpers import WIDGET_CRD, WIDGET_GROUP, WIDGET_PLURAL, WIDGET_VERSION, widget
from kubernetes.client.rest import ApiException

from envtest import Recorder, RestMapper, eventually

pytestmark = pytest.mark.envtest_crds(WIDGET_CRD)


def _writer(envtest, name: str) -> tuple[str, kubernetes.client.CustomObjectsApi]:
    user = envtest.add_user(f"{name}-{uuid.uuid4().hex[:6]}", ["system:masters"])
    return user.name, kubernetes.client.CustomObjectsApi(user.api_client())


def _read(api: kubernetes.client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    return api.get_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                            WIDGET_PLURAL, name)


def _write_status(api: kubernetes.client.CustomObjectsApi, namespace: str, obj: dict[str, Any],
                  ready: bool) -> dict[str, Any]:
    obj = {**obj, "status": {"ready": ready}}
    return api.replace_namespaced_custom_object_status(
        WIDGET_GROUP, WIDGET_VERSION, namespace, WIDGET_PLURAL, obj["metadata"]["name"], obj)


def test_the_same_status_ten_times_is_nine_redundant_writes(envtest, k8s, namespace,
                                                             api_calls) -> None:
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("spam"))
    user, api = _writer(envtest, "spammer")
    for _ in range(10):  # a controller that writes its status on every reconcile
        _write_status(api, namespace, _read(api, namespace, "spam"), ready=True)
    judged = api_calls.judged(user=user, resource=WIDGET_PLURAL, subresource="status")
    assert (len(judged.redundant), len(judged.effective), len(judged.unjudged)) == (9, 1, 0)
    with pytest.raises(AssertionError, match="9 redundant writes"):
        api_calls.assert_no_redundant_writes(user=user, subresource="status")
    api_calls.assert_no_redundant_writes(tolerance=9, user=user, subresource="status")


def test_writing_only_on_change_has_none(envtest, k8s, namespace, api_calls) -> None:
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("calm"))
    user, api = _writer(envtest, "calm")
    for wanted in (True, True, False, False, True):  # reconciles; it writes when different
        current = _read(api, namespace, "calm")
        if (current.get("status") or {}).get("ready") != wanted:
            _write_status(api, namespace, current, wanted)
    assert api_calls.count(user=user, verb="update", succeeded=True) == 3
    assert api_calls.redundant(user=user) == []
    api_calls.assert_no_redundant_writes(user=user)


def test_two_writers_a_conflict_and_a_delete(envtest, k8s, namespace, api_calls,
                                             recorder) -> None:
    recording = recorder(WIDGET_PLURAL)
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("shared"))
    alice, a = _writer(envtest, "alice")
    bob, b = _writer(envtest, "bob")
    seen_by_a, seen_by_b = _read(a, namespace, "shared"), _read(b, namespace, "shared")
    _write_status(a, namespace, seen_by_a, True)                    # changes it
    with pytest.raises(ApiException) as conflict:
        _write_status(b, namespace, seen_by_b, False)               # stale: 409
    assert conflict.value.status == 409
    _write_status(b, namespace, _read(b, namespace, "shared"), False)  # changes it
    _write_status(a, namespace, _read(a, namespace, "shared"), False)  # the same: no-op
    _write_status(b, namespace, _read(b, namespace, "shared"), False)  # the same: no-op
    k8s.custom.delete_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, "shared")
    judged = api_calls.judged(user=[alice, bob], resource=WIDGET_PLURAL)
    assert [c.user for c in judged.effective] == [alice, bob]
    # Bob's last update is followed by the delete: the audit log alone cannot judge it, the
    # recorder can (the change from the version it carried is the deletion, no update's).
    assert [c.user for c in judged.redundant] == [alice, bob]
    assert judged.unjudged == []
    assert api_calls.count(user=bob, code=409) == 1
    # Each write joined to the change it made: the 409 is no write, the no-ops made none.
    eventually(lambda: any(c.kind == "DELETED" for c in recording.changes), timeout=10)
    joined = api_calls.attributed(resource=WIDGET_PLURAL)
    story = [(a.call.user, a.call.verb, a.change.kind if a.change else None,
              sorted(f.path for f in a.change.fields)
              if a.change and a.change.kind == "MODIFIED" else []) for a in joined]
    admin = joined[0].call.user
    assert story == [(admin, "create", "ADDED", []),
                     (alice, "update", "MODIFIED", ["status.ready"]),
                     (bob, "update", "MODIFIED", ["status.ready"]),
                     (alice, "update", None, []),
                     (bob, "update", None, []),
                     (admin, "delete", "DELETED", [])], story
    assert joined[2].change.fields[0].new is False  # bob's change, not alice's
    assert all(a.exact for a in joined)


GAUGE_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gauges.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Gauge", "plural": "gauges", "singular": "gauge"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {"status": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.mark.envtest_crds(GAUGE_CRD)
def test_timestamp_only_changes_are_redundant_only_when_called_noise(
        envtest, k8s, namespace, api_calls, recorder) -> None:
    recording = recorder("gauges")
    k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace, "gauges", {
        "apiVersion": "example.com/v1", "kind": "Gauge", "metadata": {"name": "g"}})
    user, api = _writer(envtest, "ticker")
    for tick in range(5):  # the phase once, then only a fresh lastUpdateTime
        current = api.get_namespaced_custom_object("example.com", "v1", namespace, "gauges",
                                                   "g")
        current["status"] = {"phase": "Ready", "lastUpdateTime": f"t{tick}"}
        api.replace_namespaced_custom_object_status("example.com", "v1", namespace, "gauges",
                                                    "g", current)
    assert api_calls.redundant(user=user) == []  # each stored a new version
    noisy = api_calls.redundant(noise=["status.lastUpdateTime"], user=user)
    assert len(noisy) == 4
    first = recording.changes[1]  # [0]: the create
    assert {f.path for f in first.fields} == {"status.phase", "status.lastUpdateTime"}
    assert [f.path for f in recording.changes[-1].fields] == ["status.lastUpdateTime"]
    with pytest.raises(ValueError, match="record the resource"):
        api_calls.redundant(noise=["*Time"], user=user, resource=WIDGET_PLURAL)


def test_recorder_of_the_whole_namespace(k8s, namespace, recorder) -> None:
    """recorder() with no kinds: every resource of the namespace, a CRD's included; a
    Secret's change is visible, its values never are."""
    recording = recorder()
    k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"},
                                                      "data": {"mode": "a"}})
    k8s.core.patch_namespaced_config_map("settings", namespace, {"data": {"mode": "b"}})
    k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "token"},
                                                  "stringData": {"key": "hunter2-s3cret"}})
    k8s.core.patch_namespaced_secret("token", namespace,
                                     {"stringData": {"key": "other-s3cret"}})
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("w"))

    def recorded() -> dict[tuple[str, str], list[Any]]:
        found: dict[tuple[str, str], list[Any]] = {}
        for change in list(recording.changes):
            found.setdefault((change.key[1], change.key[3]), []).append(change)
        return found

    eventually(lambda: {("configmaps", "settings"), ("secrets", "token"),
                        (WIDGET_PLURAL, "w")} <= set(recorded())
               and len(recorded()[("secrets", "token")]) == 2
               and len(recorded()[("configmaps", "settings")]) == 2, timeout=10)
    changes = recorded()
    mode = [f for f in changes[("configmaps", "settings")][1].fields if f.path == "data.mode"]
    assert [(f.old, f.new) for f in mode] == [("a", "b")]
    secret_change = [f for f in changes[("secrets", "token")][1].fields if f.path == "data.key"]
    assert len(secret_change) == 1 and secret_change[0].old != secret_change[0].new
    assert str(secret_change[0].new).startswith("<redacted ")
    text = repr(recording.changes)
    assert "s3cret" not in text
    assert base64.b64encode(b"hunter2-s3cret").decode() not in text
    assert not any(c.key[1] == "events" for c in recording.changes)


def test_a_session_wide_recorder_learns_new_kinds_and_forgets_finished_namespaces(
        envtest, k8s, make_namespace) -> None:
    """What --envtest-record runs: one recorder for all namespaces (set up once, not per
    test), a view per test's namespace, kinds added when CRDs arrive, memory freed after."""
    first, second = make_namespace("rec-a"), make_namespace("rec-b")
    api = envtest.api_client()
    everything = [i for i in RestMapper(api).all_resources()
                  if i.namespaced and i.plural == "configmaps"]
    with Recorder(api, everything, None) as recording:
        recording.add([i for i in RestMapper(api).all_resources()
                       if i.group == WIDGET_GROUP and i.plural == WIDGET_PLURAL])
        a, b = recording.view(first), recording.view(second)
        for namespace in (first, second):
            k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
        k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, second,
                                                   WIDGET_PLURAL, widget("w"))
        eventually(lambda: len(a.changes) == 1 and len(b.changes) == 2, timeout=10)
        assert {c.key[1] for c in b.changes} == {"configmaps", WIDGET_PLURAL}
        assert not a.covers(b.changes[0].key)  # a view answers for its namespace only
        recording.forget(first)
        assert a.changes == [] and len(b.changes) == 2
        # A forgotten namespace stays forgotten (its objects' later removal is not kept).
        k8s.core.delete_namespaced_config_map("c", first)
        k8s.core.delete_namespaced_config_map("c", second)
        eventually(lambda: len(b.changes) == 3, timeout=10)
        assert a.changes == [] and not any(c.key[2] == first for c in recording.changes)
