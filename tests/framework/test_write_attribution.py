"""Each write joined to its own change, whoever wrote next: the verdicts a user reads are right.

The audit log says who wrote and which resourceVersion an update carried; the
recorder says which versions the object went through.  What joins them must not
hand one writer's change to another: an update that stored nothing, followed
by another writer's patch, is the case that went wrong (kopf does it after
every handler: a status patch, then a patch of its annotations).
"""

from __future__ import annotations

import uuid
from typing import Any

import kubernetes.client
import pytest
from framework_helpers import WIDGET_CRD, WIDGET_GROUP, WIDGET_PLURAL, WIDGET_VERSION, widget

from envtest import eventually

pytestmark = pytest.mark.envtest_crds(WIDGET_CRD)


def _user(envtest: Any, name: str, agent: str | None = None) -> tuple[str, Any]:
    user = envtest.add_user(f"{name}-{uuid.uuid4().hex[:6]}", ["system:masters"])
    client = user.api_client()
    if agent is not None:  # what the apiserver names its field manager after
        client.user_agent = agent
    return user.name, client


def _settled(recording: Any, count: int) -> None:
    eventually(lambda: len(recording.changes) >= count, timeout=10)


def test_a_no_op_update_then_another_writers_patch(envtest, k8s, namespace, recorder,
                                                   api_calls) -> None:
    recording = recorder("configmaps")
    alice, client = _user(envtest, "alice", agent="alice-app/1.0")
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"},
                                                  "data": {"a": "1"}})
    kept = core.read_namespaced_config_map("cm", namespace)
    core.replace_namespaced_config_map("cm", namespace, kept)  # the same: stores nothing
    k8s.core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}})  # changes it
    _settled(recording, 2)

    (create, update) = api_calls.attributed(user=alice)
    assert (create.call.verb, create.change.kind) == ("create", "ADDED")
    assert update.call.verb == "update" and update.change is None and update.exact
    (patch,) = api_calls.attributed(verb="patch", resource="configmaps")
    assert patch.change is not None and [f.path for f in patch.change.fields] == ["data.a"]
    assert patch.change.previous_version == update.call.resource_version
    # The verdicts agree: alice's update was redundant, the admin's patch was not.
    assert api_calls.redundant(user=alice) == [update.call]
    assert api_calls.judged(verb="patch", resource="configmaps").effective == [patch.call]
    with pytest.raises(AssertionError, match="1 redundant write"):
        api_calls.assert_no_redundant_writes(user=alice)


def test_kopf_style_a_status_patch_that_changed_nothing_then_an_annotation_patch(
        envtest, k8s, namespace, recorder, api_calls) -> None:
    """One user, no resourceVersion in either write: the subresource tells them apart."""
    recording = recorder(WIDGET_PLURAL)
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("w"))
    operator, client = _user(envtest, "kopfish")
    api = kubernetes.client.CustomObjectsApi(client)

    def status(ready: bool) -> None:
        api.patch_namespaced_custom_object_status(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                                  WIDGET_PLURAL, "w", {"status": {"ready": ready}})

    def bookkeeping(step: int) -> None:
        api.patch_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                           WIDGET_PLURAL, "w", {"metadata": {"annotations": {
                                               "example.com/last-handled": str(step)}}})

    status(True)        # a change
    bookkeeping(1)      # a change
    status(True)        # the same status: stores nothing
    bookkeeping(2)      # a change
    _settled(recording, 4)  # ADDED + 3 changes

    judged = api_calls.judged(user=operator)
    assert [(c.verb, c.subresource) for c in judged.redundant] == [("patch", "status")]
    assert len(judged.effective) == 3 and judged.unjudged == []
    joined = api_calls.attributed(user=operator)
    assert [(a.call.subresource, a.change and sorted({f.path.split(".")[0] for f in
                                                      a.change.fields})) for a in joined] == [
        ("status", ["status"]), ("", ["metadata"]), ("status", None), ("", ["metadata"])]


def test_writes_that_cannot_be_judged_fail_the_assertion_and_say_why(
        envtest, k8s, namespace, api_calls) -> None:
    """Without the changes (no recorder), a patch cannot be judged: said, not passed over."""
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("p"))
    operator, client = _user(envtest, "patcher")
    api = kubernetes.client.CustomObjectsApi(client)
    for _ in range(2):
        api.patch_namespaced_custom_object_status(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                                  WIDGET_PLURAL, "p", {"status": {"ready": True}})
    with pytest.raises(AssertionError, match=r"2 writes could not be judged.*recorder"):
        api_calls.assert_no_redundant_writes(user=operator)
    api_calls.assert_no_redundant_writes(user=operator, unjudged="ignore")


def test_with_the_recorder_the_same_patches_are_judged(envtest, k8s, namespace, recorder,
                                                       api_calls) -> None:
    recording = recorder(WIDGET_PLURAL)
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("p"))
    operator, client = _user(envtest, "patcher")
    api = kubernetes.client.CustomObjectsApi(client)
    for _ in range(2):
        api.patch_namespaced_custom_object_status(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                                  WIDGET_PLURAL, "p", {"status": {"ready": True}})
    _settled(recording, 2)
    with pytest.raises(AssertionError, match="1 redundant write"):
        api_calls.assert_no_redundant_writes(user=operator)
