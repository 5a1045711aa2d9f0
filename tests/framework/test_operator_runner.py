"""The operator runner, with a tiny Widget controller written here.

For each Widget the controller creates a Pod (owned by the Widget), waits until
that Pod is Running and Ready, then sets the Widget's ``status.ready`` once.
It runs in a thread (``run_operator(fn)``) and, from the same source, as a
subprocess (``run_operator([python, script, "--kubeconfig", "{kubeconfig}"])``),
as its own client-certificate user whose API writes the audit log counts.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from framework_helpers import WIDGET_GROUP, WIDGET_PLURAL, WIDGET_VERSION, widget
from kubernetes import watch
from kubernetes.client import ApiException, AuthenticationV1Api, CoreV1Api, CustomObjectsApi

from envtest import (
    ApiCalls,
    Clients,
    Cluster,
    ConfigurationError,
    OperatorCrashed,
    OperatorHandle,
    Pods,
    ProcessOperator,
    ThreadOperator,
    add_watchdog,
    consistently,
    eventually,
    remove_watchdog,
)

GROUP, VERSION, PLURAL = WIDGET_GROUP, WIDGET_VERSION, WIDGET_PLURAL
log = logging.getLogger("widget-controller")
RunOperator = Callable[..., OperatorHandle]

# -- the controller under test ---------------------------------------------------------------


def server_message(exc: ApiException) -> str:
    """The apiserver's own words from an error response."""
    try:
        return json.loads(exc.body)["message"]
    except Exception:
        return f"{exc.status} {exc.reason}"


def reconcile(core: Any, custom: Any, namespace: str) -> None:
    """One pass: every Widget gets a Pod; a Widget whose Pod is Running and Ready gets ready."""
    widgets = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
    for item in widgets:
        name = item["metadata"]["name"]
        if (item.get("status") or {}).get("ready"):
            continue
        pod_name = f"{name}-pod"
        try:
            pod = core.read_namespaced_pod(pod_name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespaced_pod(namespace, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "labels": {"widget": name},
                             "ownerReferences": [{
                                 "apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
                                 "name": name, "uid": item["metadata"]["uid"],
                                 "controller": True}]},
                "spec": {"containers": [{"name": "main",
                                         "image": item["spec"].get("image", "busybox")}]},
            })
            log.info("created pod %s for widget %s", pod_name, name)
            continue
        conditions = pod.status.conditions or []
        if pod.status.phase != "Running" or not any(
                c.type == "Ready" and c.status == "True" for c in conditions):
            continue
        custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name,
                                                     {"status": {"ready": True}})
        log.info("widget %s is ready", name)


def run_widget_controller(api_client: Any, stop_event: Any, namespace: str) -> None:
    """Reconcile on every Pod or Widget change; return within about a second of stop_event."""
    core, custom = CoreV1Api(api_client), CustomObjectsApi(api_client)
    changes: queue.Queue[str] = queue.Queue()

    def pump(kind: str, list_function: Any, *args: str) -> None:
        while not stop_event.is_set():
            try:
                for _ in watch.Watch().stream(list_function, *args, timeout_seconds=1):
                    changes.put(kind)
                    if stop_event.is_set():
                        return
            except Exception as exc:  # e.g. forbidden until RBAC catches up: retry
                log.warning("watch of %s failed: %s", kind, exc)
                stop_event.wait(0.2)

    pumps = [threading.Thread(target=pump, args=("pods", core.list_namespaced_pod, namespace),
                              daemon=True),
             threading.Thread(target=pump, args=("widgets", custom.list_namespaced_custom_object,
                                                 GROUP, VERSION, namespace, PLURAL),
                              daemon=True)]
    for thread in pumps:
        thread.start()
    log.info("watching namespace %s", namespace)
    while not stop_event.is_set():
        try:
            reconcile(core, custom, namespace)
        except ApiException as exc:
            log.error("reconcile failed: %s", server_message(exc))
        try:
            changes.get(timeout=0.5)
            while not changes.empty():  # coalesce a burst of events into one pass
                changes.get_nowait()
        except queue.Empty:
            pass
    for thread in pumps:
        thread.join(timeout=5)
    log.info("stopped")


SCRIPT_HEADER = '''\
from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import signal
import sys
import threading
from typing import Any

from kubernetes import config, watch
from kubernetes.client import ApiException, CoreV1Api, CustomObjectsApi

GROUP, VERSION, PLURAL = {group!r}, {version!r}, {plural!r}
log = logging.getLogger("widget-controller")

'''

SCRIPT_MAIN = '''

def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    api_client = config.new_client_from_config(config_file=args.kubeconfig)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    run_widget_controller(api_client, stop, args.namespace)


if __name__ == "__main__":
    main()
'''


def write_controller_script(directory: Path) -> Path:
    """The same controller as a standalone program: this module's functions, verbatim."""
    source = SCRIPT_HEADER.format(group=GROUP, version=VERSION, plural=PLURAL) + "\n\n".join(
        inspect.getsource(f) for f in (server_message, reconcile, run_widget_controller)
    ) + SCRIPT_MAIN
    path = directory / "widget_controller.py"
    path.write_text(source)
    return path


# -- helpers -------------------------------------------------------------------------------

NO_STATUS_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "pytest-envtest-widget-controller-without-status"},
    "rules": [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"],
         "verbs": ["get", "list", "watch", "create"]},
        # no widgets/status update or patch: the controller cannot report readiness
    ],
}


def get_widget(k8s: Clients, namespace: str, name: str) -> dict[str, Any]:
    return k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)


def is_ready(k8s: Clients, namespace: str, name: str) -> bool:
    return bool((get_widget(k8s, namespace, name).get("status") or {}).get("ready"))


def pod_phase(k8s: Clients, namespace: str, name: str) -> str:
    return k8s.core.read_namespaced_pod(name, namespace).status.phase


@pytest.fixture(params=["thread", "process"])
def widget_operator(request: pytest.FixtureRequest, run_operator: RunOperator,
                    widget_crd: str, namespace: str, tmp_path: Path) -> OperatorHandle:
    if request.param == "thread":
        return run_operator(functools.partial(run_widget_controller, namespace=namespace),
                            name="widgets", loggers=["widget-controller"])
    script = write_controller_script(tmp_path)
    return run_operator([sys.executable, str(script), "--kubeconfig", "{kubeconfig}",
                         "--namespace", namespace], name="widgets-process")


# -- the scenario ------------------------------------------------------------------------


def test_widget_controller_waits_for_a_running_ready_pod_and_writes_status_once(
        widget_operator: OperatorHandle, k8s: Clients, namespace: str, pods: Pods,
        wait_for: Callable[..., dict[str, Any]], api_calls: ApiCalls) -> None:
    user = f"pytest-envtest:{widget_operator.name}"
    assert widget_operator.user.name == user
    created = k8s.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                         widget("w1"))

    pod = wait_for("Pod", "w1-pod", lambda p: True, timeout=30)  # a subprocess starts slower
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Widget", "w1",
                                                           created["metadata"]["uid"])
    assert owner["controller"] is True

    def state() -> tuple[str, bool]:
        return pod_phase(k8s, namespace, "w1-pod"), is_ready(k8s, namespace, "w1")

    def expect(wanted: tuple[str, bool]) -> Callable[[], bool]:
        def holds() -> bool:
            assert state() == wanted  # raises with the state seen, for the failure message
            return True
        return holds

    consistently(expect(("Pending", False)), duration=0.5)
    pods.set_running("w1-pod", ready=False)
    consistently(expect(("Running", False)), duration=0.5)  # Running is not Ready
    pods.set_ready("w1-pod")
    wait_for("widgets.example.com", "w1",
             lambda w: (w.get("status") or {}).get("ready") is True, timeout=10)

    def status_writes() -> list[Any]:
        return api_calls.calls(user=user, verb=["update", "patch"], resource="widgets",
                               subresource="status")

    def one_write() -> bool:
        writes = status_writes()
        assert len(writes) == 1, [str(c) for c in writes]
        return True

    consistently(one_write, duration=0.5)  # once, and not again
    write = status_writes()[0]
    assert (write.namespace, write.name, write.code) == (namespace, "w1", 200)
    assert api_calls.count(user=user, verb="create", resource="pods", namespace=namespace) == 1
    assert {c.target for c in api_calls.calls(user=user)} == {"pods", "widgets/status"}

    logs = widget_operator.logs()
    assert "created pod w1-pod for widget w1" in logs
    assert "widget w1 is ready" in logs


def test_least_privilege_shows_the_servers_forbidden_message(
        run_operator: RunOperator, widget_crd: str, k8s: Clients, namespace: str, pods: Pods,
        wait_for: Callable[..., dict[str, Any]], api_calls: ApiCalls) -> None:
    operator = run_operator(functools.partial(run_widget_controller, namespace=namespace),
                            name="least", cluster_roles=NO_STATUS_ROLE,
                            loggers=["widget-controller"])
    assert operator.user.groups == ()  # no system:masters: only the role's rules apply
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("w2"))
    wait_for("Pod", "w2-pod", lambda p: True, timeout=20)  # the verbs it has do work
    pods.set_running("w2-pod")
    forbidden = (f'widgets.example.com "w2" is forbidden: User "pytest-envtest:least" cannot '
                 f'patch resource "widgets/status" in API group "{GROUP}" in the namespace '
                 f'"{namespace}"')
    eventually(lambda: forbidden in operator.logs(), timeout=10)
    denied = api_calls.calls(user="pytest-envtest:least", resource="widgets",
                             subresource="status")
    assert denied and {c.code for c in denied} == {403}
    assert not is_ready(k8s, namespace, "w2")
    binding = k8s.rbac.read_cluster_role_binding(
        "pytest-envtest:pytest-envtest:least:pytest-envtest-widget-controller-without-status")
    assert binding.subjects[0].name == "pytest-envtest:least"


# -- the runner itself ----------------------------------------------------------------------


def test_thread_operator_acts_as_its_own_user_logs_and_stops_promptly(
        run_operator: RunOperator) -> None:
    identities: queue.Queue[Any] = queue.Queue()
    own = logging.getLogger("test.own-operator")

    def operator(api_client: Any, stop_event: threading.Event) -> None:
        review = AuthenticationV1Api(api_client).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        identities.put(review.status.user_info)
        own.info("started as %s", review.status.user_info.username)
        logging.getLogger("test.someone-else").warning("not the operator's log")
        stop_event.wait()
        own.info("stopping")

    running = run_operator(operator, name="whoami", loggers=["test.own-operator"])
    assert isinstance(running, ThreadOperator)
    user_info = identities.get(timeout=10)
    assert user_info.username == "pytest-envtest:whoami"
    assert "system:masters" in user_info.groups
    eventually(lambda: "started as pytest-envtest:whoami" in running.logs(), timeout=5)
    assert "INFO test.own-operator [operator-whoami]" in running.logs()
    assert "not the operator's log" not in running.logs()

    started = time.monotonic()
    running.stop()
    assert time.monotonic() - started < 1
    assert not running.thread.is_alive()
    assert "stopping" in running.logs()
    assert running.crash() is None
    assert own.level == logging.NOTSET and not own.handlers  # logging left as it was


def test_operator_ignoring_its_stop_event_is_reported(run_operator: RunOperator) -> None:
    release = threading.Event()

    def stubborn(api_client: Any, stop_event: threading.Event) -> None:
        release.wait(30)

    running = run_operator(stubborn, name="stubborn", stop_timeout=0.2)
    try:
        with pytest.raises(OperatorCrashed, match="did not return within 0.2 s of its stop"):
            running.stop()
    finally:
        release.set()
        running.thread.join(5)  # type: ignore[attr-defined]


def test_a_crashing_thread_operator_fails_waits_at_once(envtest: Cluster) -> None:
    # Built by hand, outside run_operator, so this test can watch the crash without failing.
    def explodes(api_client: Any, stop_event: threading.Event) -> None:
        raise RuntimeError("widget cache corrupted")

    user = envtest.add_user("pytest-envtest:crasher", ("system:masters",))
    operator = ThreadOperator("crasher", user, explodes, 5.0, ())
    add_watchdog(operator.check)
    try:
        started = time.monotonic()
        with pytest.raises(OperatorCrashed) as raised:
            eventually(lambda: False, timeout=30)
        assert time.monotonic() - started < 5
    finally:
        remove_watchdog(operator.check)
        operator.stop()
    message = str(raised.value)
    assert "operator 'crasher' crashed" in message
    assert "RuntimeError: widget cache corrupted" in message
    assert "in explodes" in message  # the traceback, not just the message


def test_a_returning_thread_operator_counts_as_crashed(envtest: Cluster) -> None:
    user = envtest.add_user("pytest-envtest:quitter", ("system:masters",))
    operator = ThreadOperator("quitter", user, lambda api, stop: None, 5.0, ())
    operator.thread.join(5)
    try:
        assert "returned before it was asked to stop" in (operator.crash() or "")
    finally:
        operator.stop()


def test_a_dying_process_operator_fails_waits_with_its_log_tail(
        envtest: Cluster, tmp_path: Path) -> None:
    user = envtest.add_user("pytest-envtest:dying", ("system:masters",))
    command = [sys.executable, "-c",
               "import os; print('kubeconfig at', os.environ['KUBECONFIG']); raise SystemExit(3)"]
    operator = ProcessOperator("dying", user, command, 5.0, None, tmp_path / "dying.log", None)
    add_watchdog(operator.check)
    try:
        with pytest.raises(OperatorCrashed) as raised:
            eventually(lambda: False, timeout=30)
    finally:
        remove_watchdog(operator.check)
        operator.stop()
    message = str(raised.value)
    assert "operator 'dying' crashed: exit code 3" in message
    assert f"kubeconfig at {user.kubeconfig_path}" in message


def test_process_operator_gets_kubeconfig_and_is_stopped(
        run_operator: RunOperator, k8s: Clients, namespace: str, tmp_path: Path,
        api_calls: ApiCalls) -> None:
    script = tmp_path / "op.py"
    script.write_text(
        "import os, signal, sys\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # until sigwait\n"
        "from kubernetes import client, config\n"
        "api = config.new_client_from_config(config_file=sys.argv[1])\n"
        "assert os.environ['KUBECONFIG'] == sys.argv[1]\n"
        "client.CoreV1Api(api).create_namespaced_config_map(sys.argv[2], {\n"
        "    'metadata': {'name': 'from-process'}, 'data': {'pid': str(os.getpid())}})\n"
        "print('created', flush=True)\n"
        "signal.sigwait([signal.SIGTERM])\n"
        "print('terminated cleanly', flush=True)\n")
    operator = run_operator([sys.executable, str(script), "{kubeconfig}", namespace],
                            name="writer")
    assert isinstance(operator, ProcessOperator)
    created = eventually(lambda: k8s.core.read_namespaced_config_map("from-process", namespace),
                         timeout=20)
    pid = int(created.data["pid"])
    assert api_calls.count(user="pytest-envtest:writer", verb="create", resource="configmaps",
                           name="from-process") == 1  # as the operator's user, not admin
    eventually(lambda: "created" in operator.logs(), timeout=5)
    operator.stop()
    assert not operator.process.running()
    assert "terminated cleanly" in operator.logs()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


LEADER = """
import signal, sys, time
import kubernetes
kubernetes.config.load_kube_config()
core = kubernetes.client.CoreV1Api()
namespace = sys.argv[1]

def release(*_):  # a leader that stops gracefully gives its lease up
    core.delete_namespaced_config_map("leader", namespace)
    sys.exit(0)

signal.signal(signal.SIGTERM, release)
core.create_namespaced_config_map(namespace, {"metadata": {"name": "leader"}})
print("leading", flush=True)
while True:
    time.sleep(0.1)
"""


def test_kill_is_the_tests_own_and_leaves_the_lease_held(run_operator, k8s, namespace,
                                                        tmp_path) -> None:
    """``kill()``: SIGKILL at once, no cleanup (the lease stays held), and no crash reported
    (the test's waits go on); ``stop()`` lets it release; a thread cannot be killed."""
    script = tmp_path / "leader.py"
    script.write_text(LEADER)
    operator = run_operator([sys.executable, str(script), namespace], name="leader")
    eventually(lambda: "leading" in operator.logs(), timeout=30)
    operator.kill()
    assert not operator.process.running()
    assert operator.crash() is None and operator.killed_with == signal.SIGKILL
    # Its lease is still held (nothing ran at its death), and a wait is not failed by it.
    assert eventually(lambda: k8s.core.read_namespaced_config_map("leader", namespace),
                      timeout=5)
    operator.stop()  # nothing more to do

    k8s.core.delete_namespaced_config_map("leader", namespace)
    second = run_operator([sys.executable, str(script), namespace], name="second")
    eventually(lambda: "leading" in second.logs(), timeout=30)
    second.stop()  # SIGTERM: it releases
    with pytest.raises(ApiException) as gone:
        k8s.core.read_namespaced_config_map("leader", namespace)
    assert gone.value.status == 404

    thread = run_operator(lambda api_client, stop: stop.wait(), name="in-a-thread")
    with pytest.raises(ConfigurationError, match="a thread cannot be killed"):
        thread.kill()


def test_a_thread_operator_given_its_kubeconfig_and_an_async_one_restart_after_a_crash(
        run_operator: Any, k8s: Any, namespace: str, faults: Any, api_calls: Any) -> None:
    """An operator of another client (lightkube here) takes its kubeconfig (its first
    parameter named so); an ``async def`` one runs in a loop of its own; a crash fault
    restarts it on a fresh user's kubeconfig."""
    import asyncio

    lightkube = pytest.importorskip(
        "lightkube", reason="a development extra, not in make test-minimums' floors")
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import ConfigMap

    def made(name: str) -> ConfigMap:
        return ConfigMap(metadata=ObjectMeta(name=name, namespace=namespace))

    def sync_operator(kubeconfig: Path, stop: threading.Event) -> None:
        client = lightkube.Client(config=KubeConfig.from_file(kubeconfig))
        while not stop.wait(0.1):
            try:
                client.create(made("sync-made"))
            except lightkube.ApiError as error:
                assert error.status.code == 409

    kubeconfigs: list[Path] = []

    async def async_operator(kubeconfig: Path, stop: asyncio.Event) -> None:
        kubeconfigs.append(kubeconfig)
        client = lightkube.AsyncClient(config=KubeConfig.from_file(kubeconfig))
        while not stop.is_set():
            try:
                await client.create(made("async-made"))
            except lightkube.ApiError as error:
                assert error.status.code == 409
            try:
                await asyncio.wait_for(stop.wait(), 0.1)
            except TimeoutError:
                pass
        await client.close()

    crash = faults.crash_after_write(1, verb="create", resource="configmaps",
                                     operator="pytest-envtest:async-lightkube")
    synced = run_operator(sync_operator, name="sync-lightkube")
    restarted = run_operator(async_operator, name="async-lightkube")
    for name in ("sync-made", "async-made"):
        eventually(lambda n=name: k8s.core.read_namespaced_config_map(n, namespace),
                   timeout=20)
    eventually(lambda: restarted.restarts == 1 and len(kubeconfigs) == 2, timeout=20)
    assert crash.injected == 1 and synced.restarts == 0
    assert kubeconfigs[0] != kubeconfigs[1]  # the fresh instance's own user
    assert api_calls.count(user=synced, verb="create", resource="configmaps",
                           succeeded=True) == 1
    restarted.check()
    synced.check()
