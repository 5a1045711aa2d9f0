"""eventually / consistently and the watch-based wait_for, against the real apiserver."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import kubernetes
import pytest
from framework_helpers import pod_body, widget
from kubernetes.client.rest import ApiException

from envtest import (
    Clients,
    Pods,
    WaitTimeoutError,
    add_watchdog,
    consistently,
    deleted,
    eventually,
    eventually_passes,
    pod_is_ready,
    remove_watchdog,
)

pytest_plugins = ["pytester"]

WaitFor = Callable[..., dict[str, Any]]


class Phase(str):
    """A phase that is only truthy once it is Ready: what a condition typically returns."""

    def __bool__(self) -> bool:
        return self == "Ready"


def config_map(k8s: Clients, namespace: str, name: str, **data: str) -> Any:
    return k8s.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def set_phase(k8s: Clients, namespace: str, name: str, value: str) -> None:
    k8s.core.patch_namespaced_config_map(name, namespace, {"data": {"phase": value}})


@pytest.fixture
def background() -> Any:
    with ThreadPoolExecutor(2) as pool:
        yield pool


# -- eventually / consistently --------------------------------------------------------


def test_eventually_returns_the_first_truthy_value(k8s: Clients, namespace: str) -> None:
    config_map(k8s, namespace, "state", phase="Ready")
    value = eventually(lambda: Phase(k8s.core.read_namespaced_config_map(
        "state", namespace).data["phase"]), timeout=5)
    assert value == "Ready"


def test_eventually_failure_shows_the_last_value(k8s: Clients, namespace: str) -> None:
    config_map(k8s, namespace, "state", phase="Pending")

    def current_phase() -> Phase:
        return Phase(k8s.core.read_namespaced_config_map("state", namespace).data["phase"])

    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as raised:
        eventually(current_phase, timeout=0.3, interval=0.05, message="state never Ready")
    assert time.monotonic() - started < 3  # the timeout bounds the wait
    message = str(raised.value)
    assert message.startswith("state never Ready: condition ")
    assert "current_phase" in message and "not met within 0.3 s" in message
    assert "last value: 'Pending'" in message
    assert isinstance(raised.value, AssertionError)  # pytest reports it as a failure


def test_eventually_failure_shows_the_last_exception(k8s: Clients, namespace: str) -> None:
    def missing() -> Any:
        return k8s.core.read_namespaced_config_map("never-created", namespace)

    with pytest.raises(WaitTimeoutError) as raised:
        eventually(missing, timeout=0.3)
    message = str(raised.value)
    # NotFoundException since client 37 (an ApiException before): the status is what counts
    assert re.search(r"last exception: (NotFound|Api)Exception: \(404\)", message), message
    assert 'configmaps \\"never-created\\" not found' in message
    assert isinstance(raised.value.__cause__, ApiException)


def test_eventually_reports_the_latest_outcome_not_an_older_exception(
        k8s: Clients, namespace: str) -> None:
    calls = []

    def appears_but_never_ready() -> Phase:
        calls.append(1)
        if len(calls) == 2:
            config_map(k8s, namespace, "late", phase="Starting")
        return Phase(k8s.core.read_namespaced_config_map("late", namespace).data["phase"])

    with pytest.raises(WaitTimeoutError) as raised:
        eventually(appears_but_never_ready, timeout=0.5, interval=0.05)
    assert len(calls) > 2
    assert "last value: 'Starting'" in str(raised.value)
    assert "exception" not in str(raised.value)


def test_eventually_fails_at_once_on_a_bug_in_the_condition(k8s: Clients, namespace: str,
                                                            envtest: Any) -> None:
    config_map(k8s, namespace, "plain", phase="Ready")

    def typo() -> Any:  # a KeyError on the client's plain dict: the test's bug, not "not yet"
        return k8s.core.read_namespaced_config_map("plain", namespace).data["phaze"]

    started = time.monotonic()
    with pytest.raises(KeyError) as raised:
        eventually(typo, timeout=30)
    assert time.monotonic() - started < 5  # not after the timeout
    assert "only 'not yet' errors are retried" in "".join(raised.value.__notes__)
    # The traceback points at the condition's own line.
    assert raised.traceback[-1].name == "typo"

    nobody = envtest.add_user("pytest-envtest:nobody-waits").api_client()
    try:
        started = time.monotonic()
        with pytest.raises(ApiException) as forbidden:  # a 403 is not "not yet" either
            eventually(lambda: kubernetes.client.CoreV1Api(nobody).list_namespaced_pod(
                namespace), timeout=30)
        assert forbidden.value.status == 403 and time.monotonic() - started < 5
    finally:
        nobody.close()

    # ignore= widens what is retried.
    with pytest.raises(WaitTimeoutError, match="KeyError"):
        eventually(typo, timeout=0.3, ignore=(KeyError,))


def test_eventually_retries_not_yet_errors_and_assertions(k8s: Clients, namespace: str) -> None:
    later = threading.Timer(0.3, config_map, [k8s, namespace, "soon"], {"phase": "Ready"})
    later.start()
    # 404 until the Timer creates it: retried.
    found = eventually(lambda: k8s.core.read_namespaced_config_map("soon", namespace))
    assert found.data == {"phase": "Ready"}
    later.join()
    attempts: list[int] = []

    def asserting() -> str:
        attempts.append(1)
        assert len(attempts) >= 3, "not yet"
        return "done"

    assert eventually_passes(asserting) == "done" and len(attempts) == 3
    with pytest.raises(WaitTimeoutError, match="AssertionError: never"):
        eventually_passes(lambda: (_ for _ in ()).throw(AssertionError("never")), timeout=0.2)


def test_consistently_passes_while_the_condition_holds(k8s: Clients, namespace: str) -> None:
    config_map(k8s, namespace, "steady", phase="Pending")
    checks = []

    def still_pending() -> bool:
        checks.append(1)
        return k8s.core.read_namespaced_config_map("steady", namespace).data["phase"] == "Pending"

    started = time.monotonic()
    # 1 s: with a second make test beside this one a read took over 0.15 s, and 0.3 s held
    # two checks.
    consistently(still_pending, duration=1.0, interval=0.05)
    assert time.monotonic() - started >= 1.0
    assert len(checks) >= 3


def test_consistently_fails_fast_when_the_condition_turns_false(
        k8s: Clients, namespace: str, background: ThreadPoolExecutor) -> None:
    config_map(k8s, namespace, "flip", phase="Pending")
    first_check = threading.Event()

    def flip_after_first_check() -> None:
        assert first_check.wait(10)
        set_phase(k8s, namespace, "flip", "Ready")

    flipper = background.submit(flip_after_first_check)

    def still_pending() -> bool:
        first_check.set()
        return k8s.core.read_namespaced_config_map("flip", namespace).data["phase"] == "Pending"

    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as raised:
        consistently(still_pending, duration=30, interval=0.02, message="flip stays pending")
    assert time.monotonic() - started < 5  # long before the 30 s duration
    flipper.result(timeout=5)
    message = str(raised.value)
    # The condition is named (it was not: a test with several could not tell which).
    assert message.startswith("flip stays pending: condition still_pending became false on "
                              "check "), message
    assert "last value: False" in message


def test_consistently_fails_when_the_condition_raises(k8s: Clients, namespace: str) -> None:
    with pytest.raises(WaitTimeoutError, match="condition <lambda> raised on check 1 .*404"):
        consistently(lambda: k8s.core.read_namespaced_config_map("gone", namespace),
                     duration=5)


# -- wait_for ----------------------------------------------------------------------------


def test_wait_for_returns_when_an_object_created_later_appears(
        wait_for: WaitFor, k8s: Clients, namespace: str,
        background: ThreadPoolExecutor) -> None:
    started = time.monotonic()
    waiting: Future[dict[str, Any]] = background.submit(
        wait_for, "ConfigMap", "later", lambda obj: True, timeout=20)
    created = config_map(k8s, namespace, "later", phase="New")
    found = waiting.result(timeout=25)
    assert found["metadata"]["uid"] == created.metadata.uid
    assert found["kind"] == "ConfigMap" and found["apiVersion"] == "v1"
    assert time.monotonic() - started < 5  # woken by the watch, not by the timeout


def test_wait_for_honours_a_condition_on_status(
        wait_for: WaitFor, pods: Pods, k8s: Clients, namespace: str,
        background: ThreadPoolExecutor) -> None:
    k8s.core.create_namespaced_pod(namespace, pod_body("server"))
    seen: list[tuple[str, bool]] = []
    looked = threading.Event()

    def ready(pod: dict[str, Any]) -> bool:
        seen.append((pod["status"].get("phase", ""), pod_is_ready(pod)))
        looked.set()
        return pod_is_ready(pod)

    waiting = background.submit(wait_for, "pods", "server", ready, timeout=20)
    assert looked.wait(10)  # the wait has read the Pending Pod
    pods.set_running("server", ready=False)
    eventually(lambda: ("Running", False) in seen, timeout=10)
    assert not waiting.done()  # Running is not Ready
    pods.set_ready("server")
    found = waiting.result(timeout=20)
    assert pod_is_ready(found)
    assert seen[0] == ("Pending", False)
    assert seen[-1] == ("Running", True)
    assert seen.index(("Running", False)) < len(seen) - 1


def test_wait_for_custom_resources_by_plural_and_group(
        wait_for: WaitFor, widget_crd: str, k8s: Clients, namespace: str) -> None:
    k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets",
                                               widget("gear"))
    found = wait_for("widgets.example.com", "gear", lambda w: w["spec"]["image"] == "busybox")
    assert found["kind"] == "Widget"
    assert wait_for("Widget", "gear", lambda w: True)["metadata"]["name"] == "gear"


def test_wait_for_deleted(wait_for: WaitFor, k8s: Clients, namespace: str,
                          background: ThreadPoolExecutor) -> None:
    k8s.core.create_namespaced_config_map(namespace, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "doomed", "finalizers": ["example.com/hold"]}})
    waiting = background.submit(wait_for, "ConfigMap", "doomed", deleted, timeout=20)
    k8s.core.delete_namespaced_config_map("doomed", namespace)
    # Deleting only marks it while a finalizer holds it: not gone yet.
    consistently(lambda: not waiting.done(), duration=0.3)
    k8s.core.patch_namespaced_config_map("doomed", namespace, {"metadata": {"finalizers": None}})
    assert waiting.result(timeout=20) == {}
    # Already gone: returns at once.
    assert wait_for("ConfigMap", "doomed", deleted, timeout=1) == {}


def test_wait_for_timeout_shows_the_last_state(wait_for: WaitFor, pods: Pods, k8s: Clients,
                                               namespace: str) -> None:
    k8s.core.create_namespaced_pod(namespace, pod_body("slow"))
    pods.set_running("slow", ready=False)

    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as raised:
        wait_for("Pod", "slow", pod_is_ready, timeout=1)
    assert time.monotonic() - started < 1.6  # the timeout is an upper bound
    message = str(raised.value)
    assert message.startswith(f"Pod {namespace}/slow: condition pod_is_ready not met "
                              "within 1 s; last state:")
    assert "phase: Running" in message and "reason: ContainersNotReady" in message
    assert "name: slow" in message
    assert "managedFields" not in message

    config_map(k8s, namespace, "stuck", phase="Pending")
    with pytest.raises(WaitTimeoutError) as raised:
        wait_for("ConfigMap", "stuck", lambda cm: cm["data"]["phase"] == "Ready", timeout=0.5)
    assert "phase: Pending" in str(raised.value)  # data, not only spec and status

    k8s.core.create_namespaced_secret(namespace, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
        "data": {"password": "aHVudGVyMg=="}})
    with pytest.raises(WaitTimeoutError) as raised:
        wait_for("Secret", "creds", lambda s: False, timeout=0.5)
    assert "password: <redacted>" in str(raised.value)
    assert "aHVudGVyMg==" not in str(raised.value)

    with pytest.raises(WaitTimeoutError, match="last state: does not exist"):
        wait_for("ConfigMap", "absent", lambda obj: True, timeout=0.5)


def test_wait_for_runs_watchdogs_while_nothing_changes(wait_for: WaitFor, k8s: Clients,
                                                      namespace: str) -> None:
    config_map(k8s, namespace, "quiet", phase="Pending")
    broken = threading.Event()

    def dependency_alive() -> None:  # what a crashed operator's watchdog does
        if broken.is_set():
            raise RuntimeError("the operator died")

    def never(obj: dict[str, Any]) -> bool:
        broken.set()  # dies right after the first look; no event will follow
        return False

    add_watchdog(dependency_alive)
    try:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="the operator died"):
            wait_for("ConfigMap", "quiet", never, timeout=30)
        assert time.monotonic() - started < 3  # noticed within a watch segment, not at 30 s
    finally:
        remove_watchdog(dependency_alive)


DEFAULT_TIMEOUT = '''
import time

import pytest
from envtest import WaitTimeoutError, eventually


def test_waits_that_name_no_timeout(wait_for):
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError, match="not met within 0.4 s"):
        eventually(lambda: False)
    with pytest.raises(WaitTimeoutError, match="not met within 0.4 s"):
        wait_for("ConfigMap", "never-made", lambda c: True)
    assert eventually(lambda: 1, timeout=3) == 1  # one the call names is kept
    assert time.monotonic() - started < 5
'''


@pytest.mark.parametrize("how", ["flag", "env", "ini"])
def test_the_session_sets_the_default_wait_timeout(inner_pytester: Any, how: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """--envtest-wait-timeout, ENVTEST_WAIT_TIMEOUT and the ini setting each reach
    eventually and wait_for: a busy CI runner gets more time for every wait at once."""
    inner_pytester.makepyfile(test_inner=DEFAULT_TIMEOUT)
    args = ["-p", "no:cacheprovider"]
    if how == "flag":
        args += ["--envtest-wait-timeout", "0.4"]
    elif how == "env":
        monkeypatch.setenv("ENVTEST_WAIT_TIMEOUT", "0.4")
    else:
        inner_pytester.makeini("[pytest]\nenvtest_wait_timeout = 0.4\n")
    result = inner_pytester.runpytest_subprocess(*args, timeout=120)
    result.assert_outcomes(passed=1)
