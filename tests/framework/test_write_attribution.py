"""Each write joined to its own change, whoever wrote next: the verdicts a user reads are right.

The audit log says who wrote and which resourceVersion an update carried; the
recorder says which versions the object went through; a receipt (the version
kube-apiserver answered a write with, kept by every client the framework makes and
every fault proxy) says what the write stored.  What joins them must not hand one
writer's change to another: an update that stored nothing, followed by another
writer's patch, is the case that went wrong (kopf does it after every handler: a
status patch, then a patch of its annotations), and it went wrong again for two
users sharing one client library, whose field manager (``OpenAPI-Generator``) is
the same.  So every test here runs with the writers on one user agent (the official
Python client's, as operators and the tests that drive them are) and on their own.
"""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from framework_helpers import WIDGET_CRD, WIDGET_GROUP, WIDGET_PLURAL, WIDGET_VERSION, widget

from envtest import ApiCalls, KopfOperator, eventually

pytestmark = pytest.mark.envtest_crds(WIDGET_CRD)

#: The writers' user agents: the official client's for all (what the field manager of
#: every writer then is), or one of their own for each.
AGENTS = pytest.mark.parametrize("agents", ["shared", "own"])


def _user(envtest: Any, name: str, agents: str = "shared") -> tuple[str, Any]:
    user = envtest.add_user(f"{name}-{uuid.uuid4().hex[:6]}", ["system:masters"])
    client = user.api_client()
    if agents == "own":  # what the apiserver names its field manager after
        client.user_agent = f"{name}-app/1.0"
    return user.name, client


def _settled(recording: Any, count: int) -> None:
    eventually(lambda: len(recording.changes) >= count, timeout=10)


@AGENTS
def test_a_no_op_update_then_another_writers_patch(agents, envtest, k8s, namespace, recorder,
                                                   api_calls) -> None:
    recording = recorder("configmaps")
    alice, client = _user(envtest, "alice", agents)
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
    assert patch.exact and patch.change.previous_version == update.call.resource_version
    # Unfiltered, the recorded resources' writes (the namespace's own create is not one).
    assert {a.call.audit_id for a in api_calls.attributed()} == {
        create.call.audit_id, update.call.audit_id, patch.call.audit_id}
    # The verdicts agree: alice's update was redundant, the admin's patch was not.
    assert api_calls.redundant(user=alice) == [update.call]
    judged = api_calls.judged()
    assert (judged.redundant, judged.effective, judged.unjudged) == (
        [update.call], [patch.call], [])
    with pytest.raises(AssertionError, match=rf"1 redundant write .*\n.* {alice} update "
                                             rf"configmaps {namespace}/cm: left the object"):
        api_calls.assert_no_redundant_writes(user=alice)
    # Asked about a resource that was not recorded: the error names that one.
    k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}})
    with pytest.raises(ValueError, match=r"needs the changes themselves: record secrets with "
                                         r"the recorder fixture first \(recorder\('secrets'\)"):
        api_calls.attributed(resource="secrets")

    # Without receipts (writers the framework's clients are not), the audit log and the
    # changes alone cannot tell two users of one field manager apart: counted, and said.
    blind = ApiCalls(api_calls.log, api_calls.since, recorders=api_calls.recorders,
                     has_status=api_calls.has_status, receipt=None)
    unjudged = blind.judged(resource="configmaps")
    if agents == "own":  # their field managers tell them apart
        assert (unjudged.redundant, unjudged.effective) == ([update.call], [patch.call]), (
            [str(c) for c in unjudged.redundant], [str(c) for c in unjudged.effective],
            [(str(c), unjudged.reasons[c.audit_id]) for c in unjudged.unjudged],
            [(c.kind, c.resource_version, c.managers, [f.path for f in c.fields])
             for c in recording.changes])
    else:
        assert unjudged.unjudged == [update.call, patch.call]
        reason = unjudged.reasons[update.call.audit_id]
        assert f"by 2 writers (envtest-admin, {alice}) sharing the field manager " \
               "OpenAPI-Generator" in reason or \
               f"by 2 writers ({alice}, envtest-admin) sharing the field manager " \
               "OpenAPI-Generator" in reason, reason
        assert "a receipt of each write tells them apart" in reason, reason


NO_OP_THEN_DONE = textwrap.dedent('''
    """Reads ConfigMap "cm", replaces it unchanged (kube-apiserver stores nothing), says done."""
    import sys
    import threading

    import kubernetes


    def run(api_client, namespace):
        core = kubernetes.client.CoreV1Api(api_client)
        core.replace_namespaced_config_map("cm", namespace,
                                           core.read_namespaced_config_map("cm", namespace))
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "done"}})


    if __name__ == "__main__":
        run(kubernetes.config.new_client_from_config(sys.argv[1]), sys.argv[2])
        threading.Event().wait()  # an operator runs until stopped
''')


def _scenario_of_an_operator(kind: str, run_operator: Any, k8s: Any, namespace: str,
                             recorder: Any, api_calls: Any, tmp_path: Path) -> None:
    """The operator (a thread or a command, on the official client) makes a no-op update;
    then the test (the official client too) patches: judged exactly, each to its writer."""
    recording = recorder("configmaps")
    k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"},
                                                      "data": {"a": "1"}})
    script = tmp_path / "no_op_operator.py"
    script.write_text(NO_OP_THEN_DONE)
    if kind == "thread":
        sys.path.insert(0, str(tmp_path))
        try:
            import no_op_operator  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(tmp_path))

        def target(api_client: Any, stop: Any) -> None:
            no_op_operator.run(api_client, namespace)
            stop.wait()

        operator = run_operator(target, name="noop")
    else:
        operator = run_operator([sys.executable, str(script), "{kubeconfig}", namespace],
                                name="noop")
    eventually(lambda: k8s.core.read_namespaced_config_map("done", namespace), timeout=30)
    k8s.core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "2"}})
    _settled(recording, 3)  # cm ADDED, done ADDED, cm's change

    [update] = api_calls.calls(user=operator, verb="update", succeeded=True)
    [patch] = api_calls.calls(verb="patch", resource="configmaps", succeeded=True)
    assert update.user_agent.split("/")[0] == patch.user_agent.split("/")[0] \
        == "OpenAPI-Generator", "one client library for both"
    judged = api_calls.judged(resource="configmaps")
    assert (judged.redundant, judged.effective, judged.unjudged) == ([update], [patch], [])
    joined = {a.call.audit_id: a for a in api_calls.attributed(resource="configmaps")}
    assert joined[update.audit_id].change is None and joined[update.audit_id].exact
    assert [f.path for f in joined[patch.audit_id].change.fields] == ["data.a"]
    # The independent account: the recorder saw exactly one change of cm after its create.
    assert [c.kind for c in recording.changes if c.key[3] == "cm"] == ["ADDED", "MODIFIED"]
    with pytest.raises(AssertionError, match=r"(?s)1 redundant write .*update configmaps"):
        api_calls.assert_no_redundant_writes(user=operator)


@pytest.mark.parametrize("kind", ["thread", "command"])
def test_an_operators_no_op_update_then_the_tests_patch_on_one_client_library(
        kind, run_operator, k8s, namespace, recorder, api_calls, tmp_path) -> None:
    _scenario_of_an_operator(kind, run_operator, k8s, namespace, recorder, api_calls, tmp_path)


KOPF_HANDLERS = textwrap.dedent('''
    import kopf


    @kopf.on.create("example.com", "v1", "widgets")
    def seen(spec, **_):
        return {"size": spec.get("size", 0)}
''')


@pytest.mark.parametrize("thread", [False, True], ids=["kopf-run", "thread"])
def test_kopfs_writes_and_the_tests_are_each_judged(thread, run_operator, k8s, namespace,
                                                     recorder, api_calls, tmp_path) -> None:
    """kopf's bookkeeping patches (status, annotations) and the test's own patches of one
    Widget: every write judged, none by a guess, and as many effective as the recorder saw
    changes; kopf reaches the apiserver through a proxy that keeps its receipts."""
    recording = recorder(WIDGET_PLURAL)
    handlers = tmp_path / "handlers.py"
    handlers.write_text(KOPF_HANDLERS)
    operator = run_operator(KopfOperator(handlers, thread=thread), name="kopf")
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, {**widget("w"),
                                                               "spec": {"size": 1}})
    done = "kopf.zalando.org/last-handled-configuration"
    eventually(lambda: done in (k8s.custom.get_namespaced_custom_object(
        WIDGET_GROUP, WIDGET_VERSION, namespace, WIDGET_PLURAL, "w")["metadata"]
        .get("annotations") or {}), timeout=30)

    def label() -> None:
        k8s.custom.patch_namespaced_custom_object(
            WIDGET_GROUP, WIDGET_VERSION, namespace, WIDGET_PLURAL, "w",
            {"metadata": {"labels": {"test": "a"}}})

    def kopf_handled_the_label() -> bool:  # kopf notes each change of labels it saw
        paths = [[f.path for f in c.fields] for c in recording.changes]
        labelled = [i for i, p in enumerate(paths) if "metadata.labels.test" in p]
        return bool(labelled) and any(f"metadata.annotations.{done}" in p
                                      for p in paths[labelled[0] + 1:])

    label()
    eventually(kopf_handled_the_label, timeout=10)
    label()  # the same again: stores nothing, and kopf has nothing to react to
    # (Had kopf's reaction to the first overlapped the second, the two would be counted,
    # not named: both answered with one version, at the same time.)

    judged = api_calls.judged(resource=WIDGET_PLURAL)
    assert judged.unjudged == [], [(str(c), judged.reasons[c.audit_id])
                                   for c in judged.unjudged]
    mine = [c for c in judged.redundant if c.user == "envtest-admin"]
    assert len(mine) == 1 and mine[0].verb == "patch", judged.redundant
    assert any(c.user == operator.user.name for c in judged.effective), judged.effective
    modified = [c for c in recording.changes if c.kind == "MODIFIED"]
    assert len(judged.effective) == len(modified), (judged.effective, modified)
    assert all(a.exact for a in api_calls.attributed(resource=WIDGET_PLURAL))


@AGENTS
def test_kopf_style_a_status_patch_that_changed_nothing_then_an_annotation_patch(
        agents, envtest, k8s, namespace, recorder, api_calls) -> None:
    """One user, no resourceVersion in either write: the subresource tells them apart."""
    recording = recorder(WIDGET_PLURAL)
    k8s.custom.create_namespaced_custom_object(WIDGET_GROUP, WIDGET_VERSION, namespace,
                                               WIDGET_PLURAL, widget("w"))
    operator, client = _user(envtest, "kopfish", agents)
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
