"""A compiled operator that is not Python, under the framework's faults: the Go order keeper.

The order keeper (``go_operator/main.go``, standard library only) lists the ConfigMaps labelled
``order=open`` every 100 ms and, for each order X, creates ``X-receipt`` and labels the order
``order=done``. Safe, it creates the receipt first; ``--unsafe``, it marks the order done first,
so a crash between the two writes loses the receipt for ever: the bug fault exploration has to
find. It runs as ``run_operator`` runs any binary, with ``{kubeconfig}`` on its command line; in
these tests (they use ``faults``) that kubeconfig points at the framework's proxy, which kills
its process group after a write and starts it again with a kubeconfig of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException, V1ConfigMap, V1ObjectMeta

from envtest import ApiCalls, Clients, Faults, OperatorHandle, ProcessOperator, eventually
from tests.support.go_operator import GoUnavailable, build_go_operator

RunOperator = Callable[..., OperatorHandle]
ORDER = "order-1"
RECEIPT = f"{ORDER}-receipt"
#: How long an order may take to be kept, a crash and a restart included (it takes about 1 s).
CONVERGES_WITHIN = 15.0


@pytest.fixture(scope="module")
def order_keeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The order keeper's binary (built once per process)."""
    try:
        return build_go_operator(tmp_path_factory.mktemp("go-operator"))
    except GoUnavailable as missing:
        pytest.skip(str(missing))


def start(run_operator: RunOperator, binary: Path, namespace: str,
          unsafe: bool = False) -> ProcessOperator:
    handle = run_operator([str(binary), "--kubeconfig", "{kubeconfig}", "--namespace", namespace,
                           *(["--unsafe"] if unsafe else [])], name="order-keeper")
    assert isinstance(handle, ProcessOperator)
    return handle


def place_order(k8s: Clients, namespace: str) -> None:
    k8s.core.create_namespaced_config_map(
        namespace, V1ConfigMap(metadata=V1ObjectMeta(name=ORDER, labels={"order": "open"})))


def order_state(k8s: Clients, namespace: str) -> tuple[str, bool]:
    """The order's label and whether its receipt exists."""
    metadata = k8s.core.read_namespaced_config_map(ORDER, namespace).metadata
    label = ((metadata and metadata.labels) or {}).get("order", "")
    try:
        k8s.core.read_namespaced_config_map(RECEIPT, namespace)
    except ApiException as error:
        if error.status != 404:
            raise
        return label, False
    return label, True


def writes(api_calls: ApiCalls, operator: OperatorHandle,
           **filters: object) -> list[tuple[str, str, int]]:
    """The operator's writes (and crashes), in order: (verb, name, code)."""
    return [(c.verb, c.name, c.code) for c in api_calls.calls(
        user=operator, verb=("create", "patch", "crash"), resource="configmaps", **filters)]


def in_order(expected: Sequence[Any], found: Sequence[Any]) -> bool:
    """Whether ``expected`` happened in that order among ``found`` (under exploration a
    point's own fault adds writes around a test's: a crash, a fresh instance's)."""
    rest = iter(found)
    return all(any(write == wanted for write in rest) for wanted in expected)


def started(operator: OperatorHandle) -> int:
    """How many instances of the operator have started (one line each in its log)."""
    return operator.logs().count("order-keeper: started (pid ")


def test_safe_mode_creates_the_receipt_then_marks_the_order_done(
        order_keeper: Path, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    operator = start(run_operator, order_keeper, namespace)
    place_order(k8s, namespace)
    eventually(lambda: order_state(k8s, namespace) == ("done", True), timeout=CONVERGES_WITHIN)
    # faulted=False: as without faults (under exploration: a crash's record, and the
    # AlreadyExists a fresh instance meets repeating the receipt, left out).
    assert api_calls.count(user=operator, verb="create", resource="configmaps", code=201) == 1
    assert api_calls.count(user=operator, verb="patch", resource="configmaps",
                           succeeded=True) >= 1
    # Receipt first: a crash between the two leaves an open order, listed again.  Without
    # faults exactly these two writes; under exploration's (a refused patch, a crash) the
    # order is listed again, so AlreadyExists for the receipt and the patch once more.
    done = writes(api_calls, operator, faulted=False)
    assert in_order([("create", RECEIPT, 201), ("patch", ORDER, 200)], done), done
    assert done[-1] == ("patch", ORDER, 200) and set(done) <= {
        ("create", RECEIPT, 201), ("create", RECEIPT, 409), ("patch", ORDER, 200)}, done
    if not api_calls.count(user=operator, injected=True):
        assert done == [("create", RECEIPT, 201), ("patch", ORDER, 200)]
    logs = operator.logs()  # (killed before it heard, a fresh instance finds it made)
    assert "created receipt order-1-receipt for order order-1" in logs or (
        operator.restarts and "receipt order-1-receipt exists already" in logs), logs
    operator.stop()  # SIGTERM: a clean exit
    assert operator.process.poll() == 0 and "stopping: " in operator.logs()


def test_safe_mode_killed_after_the_receipt_finds_it_made_and_marks_the_order_done(
        order_keeper: Path, faults: Faults, run_operator: RunOperator, k8s: Clients,
        namespace: str, api_calls: ApiCalls) -> None:
    crash = faults.crash_after_write(1, verb="create", resource="configmaps")
    operator = start(run_operator, order_keeper, namespace)
    place_order(k8s, namespace)
    eventually(lambda: order_state(k8s, namespace) == ("done", True), timeout=CONVERGES_WITHIN)
    # (Under exploration a point's own crash restarts it once more; the instance it starts
    # may not have logged its start yet.)
    assert crash.injected == 1 and operator.restarts >= 1
    eventually(lambda: started(operator) == operator.restarts + 1, timeout=CONVERGES_WITHIN)
    # The first instance made the receipt and was killed before it heard so; the second found
    # the order still open, got AlreadyExists for the receipt and marked the order done.
    assert in_order([("create", RECEIPT, 201), ("crash", RECEIPT, 0), ("create", RECEIPT, 409),
                     ("patch", ORDER, 200)], writes(api_calls, operator))
    assert "receipt order-1-receipt exists already" in operator.logs()
    operator.check()  # the kill was the fault's: no crash to report


def test_unsafe_mode_killed_after_marking_the_order_done_never_makes_the_receipt(
        order_keeper: Path, faults: Faults, run_operator: RunOperator, k8s: Clients,
        namespace: str, api_calls: ApiCalls) -> None:
    crash = faults.crash_after_write(1, verb="patch")
    operator = start(run_operator, order_keeper, namespace, unsafe=True)
    place_order(k8s, namespace)
    eventually(lambda: operator.restarts == 1 and started(operator) == 2,
               timeout=CONVERGES_WITHIN)
    [killed] = [c for c in api_calls.calls(user=operator, injected=True) if c.verb == "crash"
                and c.name == ORDER]  # (its own: exploration may add a fault of a point's)
    assert (killed.verb, killed.name, crash.injected) == ("crash", ORDER, 1)
    # The restarted instance lists the open orders every 100 ms. Lists are not audited (the
    # audit log has writes), so a rule counts them from here: it fails the third (which the
    # operator must survive too) and has seen six once the instance has listed three times
    # more. By then it has had every chance to make the receipt, and found no open order.
    listed = faults.error(503, verb="list", resource="configmaps", nth=3)
    eventually(lambda: listed.matched >= 6, timeout=CONVERGES_WITHIN,
               message="the restarted operator stopped listing")
    assert listed.injected == 1 and "list orders: HTTP 503" in operator.logs()
    assert order_state(k8s, namespace) == ("done", False)  # the bug: done, and no receipt
    found = writes(api_calls, operator)  # (a point's refused patch may come first)
    assert in_order([("patch", ORDER, 200), ("crash", ORDER, 0)], found), found
    assert not [w for w in found if w[0] == "create"], found
    operator.check()


def test_safe_mode_retries_a_failed_create_and_a_conflicting_patch(
        order_keeper: Path, faults: Faults, run_operator: RunOperator, k8s: Clients,
        namespace: str, api_calls: ApiCalls) -> None:
    conflict = faults.conflict(verb="patch", nth=1)
    error = faults.error(500, verb="create", nth=1)
    operator = start(run_operator, order_keeper, namespace)
    place_order(k8s, namespace)
    eventually(lambda: order_state(k8s, namespace) == ("done", True), timeout=CONVERGES_WITHIN)
    assert (error.injected, conflict.injected) == (1, 1)
    # Restarted only by a crash (exploration's point, if any): never by a failure it retries.
    # (A crash is recorded when it fires; ``restarts`` counts the fresh instance once it is
    # started: the state may converge in between.)
    eventually(lambda: operator.restarts == api_calls.count(user=operator, verb="crash",
                                                            injected=True), timeout=10)
    # Each failure is logged and tried again on a later tick: the 500 create, the create that
    # made the receipt, the 409 patch, then (the order still open) AlreadyExists and the patch.
    assert in_order([("create", RECEIPT, 500), ("create", RECEIPT, 201), ("patch", ORDER, 409),
                     ("create", RECEIPT, 409), ("patch", ORDER, 200)],
                    writes(api_calls, operator))
    assert in_order([500, 409], [c.code for c in api_calls.calls(user=operator, injected=True)])
    logs = operator.logs()
    assert "HTTP 500 InternalError" in logs and "HTTP 409 Conflict" in logs
    operator.check()
