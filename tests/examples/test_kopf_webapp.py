"""A kopf operator under test: CRD, handlers, kopf's status, a Pod moved Running, its API calls.

The operator (``kopf_webapp/handlers.py``) gives each WebApp a Pod and mirrors the Pod's
phase into the WebApp's status.  It runs the way it runs in production (``kopf run`` in a
subprocess) and, for speed, in a thread of the test process; the test is the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envtest import KopfOperator, eventually

HERE = Path(__file__).parent / "kopf_webapp"
KOPF_BOOKKEEPING = "kopf.zalando.org/last-handled-configuration"


@pytest.mark.envtest_crds(str(HERE / "crd.yaml"))
@pytest.mark.envtest_explore_expect(
    "crash after the * patch of webapps shop",
    reason="kopf stores a handler's success (a patch of the object's annotations) before its "
           "result (a patch of the status): killed between the two, a fresh instance finds "
           "the change handled and status.create_pod is never written; kopf's design, not "
           "the example's (docs/faults.md)")
@pytest.mark.parametrize("thread", [False, True], ids=["kopf-run", "thread"])
def test_a_webapp_gets_a_pod_whose_phase_kopf_reports(thread, run_operator, apply, pods, k8s,
                                                      namespace, wait_for, api_calls):
    operator = run_operator(KopfOperator(HERE / "handlers.py", thread=thread), name="webapp")
    apply({"apiVersion": "kopf.example.com/v1", "kind": "WebApp",
           "metadata": {"name": "shop"}, "spec": {"image": "nginx:1.27"}})

    # kopf ran the create handler: the Pod exists, owned by the WebApp, and kopf wrote the
    # handler's return value into the WebApp's status.
    pod = eventually(lambda: k8s.core.read_namespaced_pod("shop-web", namespace), timeout=30)
    assert pod.metadata.owner_references[0].kind == "WebApp"
    webapp = wait_for("WebApp", "shop", lambda w: w.status.create_pod.pod == "shop-web",
                      timeout=30)

    # No kubelet: the test moves the Pod; the operator mirrors the phase.
    pods.set_running("shop-web")
    webapp = wait_for("WebApp", "shop", lambda w: w.status.phase == "Running", timeout=30)
    assert KOPF_BOOKKEEPING in webapp.metadata.annotations

    # Telling the operator's own writes from kopf's bookkeeping, by what they write to:
    # - the handler's work: the Pod it created, and the phase it patched into the status;
    # - kopf's bookkeeping: patches of the WebApp object itself (its annotations), and its
    #   handler-result patches of the status.
    assert api_calls.count(user=operator, verb="create", resource="pods", succeeded=True) == 1
    # (injected=False: under --envtest-explore, the faults injected are calls too.)
    bookkeeping = api_calls.calls(user=operator, resource="webapps", subresource="",
                                  injected=False)
    assert bookkeeping and {c.verb for c in bookkeeping} == {"patch"}
    status_writes = api_calls.calls(user=operator, resource="webapps", subresource="status",
                                    succeeded=True)
    assert len(status_writes) >= 2  # kopf's result of create_pod, and the mirrored phase
    assert not api_calls.calls(user=operator, code=403), "the operator lacked a permission"
    assert operator.crash() is None
    assert "Handler 'create_pod' succeeded" in operator.logs()
