"""The faults fixture, through run_operator: in a test that uses it, operators reach the apiserver
through a proxy of their own, unchanged when no fault is set, and meet exactly the faults the test
asks for.

The operators here are tiny and written for each fault (threads unless a command is the point);
what they saw is what they report, and the apiserver's audit log says what really reached it.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import ApiException, CoreV1Api

from envtest import (
    ApiCalls,
    Clients,
    Cluster,
    ConfigurationError,
    Faults,
    KopfOperator,
    OperatorHandle,
    ProcessOperator,
    ThreadOperator,
    eventually,
    parse_fault,
)

RunOperator = Callable[..., OperatorHandle]


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data}


def names(core: CoreV1Api, namespace: str) -> set[str]:
    return {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}


# -- transparent -----------------------------------------------------------------------------


def _in_background(work: Callable[[], None]) -> None:
    """Run ``work`` on a daemon thread: an operator thread returns as soon as it is asked to
    stop, and a watch it left open ends when its proxy closes (errors then are expected)."""

    def guarded() -> None:
        try:
            work()
        except Exception:
            pass

    threading.Thread(target=guarded, daemon=True).start()


def test_a_thread_operator_works_through_its_proxy_as_itself(
        faults: Faults, run_operator: RunOperator, envtest: Cluster, k8s: Clients,
        namespace: str, api_calls: ApiCalls) -> None:
    seen: queue.Queue = queue.Queue()
    hosts: list[str] = []

    def operator(api_client: Any, stop: threading.Event) -> None:
        hosts.append(api_client.configuration.host)
        core = CoreV1Api(api_client)
        core.create_namespaced_config_map(namespace, config_map("made", a="1"))
        core.patch_namespaced_config_map("made", namespace, {"data": {"b": "2"}})
        start = core.list_namespaced_config_map(namespace).metadata.resource_version

        def pump() -> None:
            for event in watch.Watch().stream(core.list_namespaced_config_map, namespace,
                                              resource_version=start, timeout_seconds=60):
                seen.put((time.monotonic(), event["type"], event["object"].metadata.name))

        _in_background(pump)
        stop.wait()

    handle = run_operator(operator, name="transparent")
    eventually(lambda: "made" in names(k8s.core, namespace))
    assert hosts[0].startswith("https://127.0.0.1:") and hosts[0] != envtest.server
    time.sleep(0.5)  # its watch is open (nothing to wait on: it has seen no event yet)
    for index in range(3):  # one at a time: the next is made once the last one arrived
        made = time.monotonic()
        k8s.core.create_namespaced_config_map(namespace, config_map(f"w{index}"))
        at, kind, name = seen.get(timeout=10)
        assert (kind, name) == ("ADDED", f"w{index}") and at - made < 1.0
    assert [(c.user, c.verb) for c in api_calls.calls(name="made")] == [
        (handle.user.name, "create"), (handle.user.name, "patch")]


COMMAND_OPERATOR = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what stops it, whatever the runner ignores
from kubernetes import client, config, watch
core = client.CoreV1Api(config.new_client_from_config(config_file=sys.argv[1]))
namespace = sys.argv[2]
print("server", core.api_client.configuration.host, flush=True)
for index in range(30):  # 30 x 100 KB: a 3 MB list
    core.create_namespaced_config_map(namespace, {"metadata": {"name": f"big-{index}"},
                                                  "data": {"payload": "x" * 100_000}})
listed = core.list_namespaced_config_map(namespace)
print("listed", len(listed.items), sum(len(c.data["payload"]) for c in listed.items), flush=True)
for event in watch.Watch().stream(core.list_namespaced_config_map, namespace,
                                  resource_version=listed.metadata.resource_version,
                                  timeout_seconds=60):
    print("event", event["type"], event["object"].metadata.name, flush=True)
"""


def test_a_command_operator_works_through_its_proxy_as_itself(
        faults: Faults, run_operator: RunOperator, envtest: Cluster, k8s: Clients,
        namespace: str, tmp_path: Path, api_calls: ApiCalls) -> None:
    script = tmp_path / "operator.py"
    script.write_text(COMMAND_OPERATOR)
    handle = run_operator([sys.executable, str(script), "{kubeconfig}", namespace],
                          name="command")
    eventually(lambda: "listed 30 3000000" in handle.logs(), timeout=60)
    assert f"server {envtest.server}" not in handle.logs()
    assert "server https://127.0.0.1:" in handle.logs()
    k8s.core.create_namespaced_config_map(namespace, config_map("late"))
    eventually(lambda: "event ADDED late" in handle.logs(), timeout=10)
    assert api_calls.count(user=handle, verb="create", resource="configmaps") == 30


def test_rbac_still_judges_the_operator(faults: Faults, run_operator: RunOperator,
                                        namespace: str, api_calls: ApiCalls) -> None:
    reader_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "pytest-envtest-faults-reader"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                              "verbs": ["get", "list", "watch"]}]}
    outcome: queue.Queue = queue.Queue()

    def operator(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        while not stop.is_set():  # RBAC reaches the authorizer through a cache: retry
            try:
                core.list_namespaced_config_map(namespace)
                break
            except ApiException:
                stop.wait(0.1)
        try:
            core.create_namespaced_config_map(namespace, config_map("forbidden"))
            outcome.put("created")
        except ApiException as error:
            outcome.put(error.status)
        stop.wait()

    handle = run_operator(operator, name="reader", cluster_roles=reader_role)
    assert outcome.get(timeout=20) == 403
    assert api_calls.count(user=handle, verb="create", code=403) == 1


# -- request faults --------------------------------------------------------------------------


def test_a_conflict_reaches_the_operator_and_not_the_apiserver(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    k8s.core.create_namespaced_config_map(namespace, config_map("target", v="0"))
    conflict = faults.conflict(verb="update", resource="configmaps", nth=1)
    answers: list[int] = []

    def operator(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        while not stop.wait(0.05):
            current = core.read_namespaced_config_map("target", namespace)
            if current.data["v"] == "1":
                continue
            current.data["v"] = "1"
            try:
                core.replace_namespaced_config_map("target", namespace, current)
                answers.append(200)
            except ApiException as error:
                answers.append(error.status)

    handle = run_operator(operator, name="updater")
    # The operator records an answer after the write landed: wait for its record, not the write.
    eventually(lambda: len(answers) >= 2)
    assert answers == [409, 200]
    assert k8s.core.read_namespaced_config_map("target", namespace).data["v"] == "1"
    assert (conflict.matched, conflict.injected) == (2, 1)
    # Only the retry reached the apiserver; the injected 409 is counted, marked.
    assert api_calls.count(user=handle, verb="update", injected=False) == 1
    injected = api_calls.calls(user=handle, injected=True)
    assert [(c.verb, c.target, c.name, c.code) for c in injected] == [
        ("update", "configmaps", "target", 409)]
    assert injected[0].fault == "409 Conflict"
    assert api_calls.count(user=handle, code=409) == 1


def _creator(namespace: str, answers: queue.Queue,
             count: int = 1) -> Callable[[Any, threading.Event], None]:
    """An operator that creates ``count`` ConfigMaps one after the other, retrying each until it
    is made; every answer (code, Retry-After, seconds taken) goes to ``answers``."""

    def operator(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        index = 0
        while index < count and not stop.is_set():
            started = time.monotonic()
            try:
                core.create_namespaced_config_map(namespace, config_map(f"made-{index}"))
                answers.put((201, None, time.monotonic() - started))
                index += 1
            except ApiException as error:
                answers.put((error.status, (error.headers or {}).get("Retry-After"),
                             time.monotonic() - started))
                stop.wait(0.05)
        stop.wait()

    return operator


@pytest.mark.parametrize(("fault", "code", "retry_after"), [
    ("error", 500, None), ("error", 503, None), ("throttle", 429, "2"), ("timeout", 504, None)])
def test_a_failed_write_is_seen_by_the_operator_as_the_apiserver_would_send_it(
        fault: str, code: int, retry_after: str | None, faults: Faults,
        run_operator: RunOperator, namespace: str, api_calls: ApiCalls) -> None:
    rule = {"error": lambda: faults.error(code, verb="create", nth=1),
            "throttle": lambda: faults.throttle(2, verb="create", nth=1),
            "timeout": lambda: faults.timeout(1.0, verb="create", nth=1)}[fault]()
    answers: queue.Queue = queue.Queue()
    handle = run_operator(_creator(namespace, answers), name=f"creator-{code}")
    status, header, seconds = answers.get(timeout=20)
    assert (status, header) == (code, retry_after)
    if fault == "timeout":
        assert seconds >= 1.0
    assert answers.get(timeout=20)[0] == 201
    assert rule.injected == 1
    assert [c.code for c in api_calls.calls(user=handle, injected=True)] == [code]
    assert api_calls.count(user=handle, verb="create", injected=False) == 1


def test_probability_with_a_seed_injects_the_same_faults_every_time(
        faults: Faults, run_operator: RunOperator, make_namespace: Callable[[str], str]) -> None:
    outcomes = []
    for name in ("first", "second"):
        namespace = make_namespace(name)
        answers: queue.Queue = queue.Queue()
        # Set before the operator starts (its user is named after it): every create counts.
        faults.error(503, verb="create", operator=f"pytest-envtest:{name}", probability=0.5,
                     seed=42)
        run_operator(_creator(namespace, answers, count=12), name=name)
        codes: list[int] = []
        while codes.count(201) < 12:
            codes.append(answers.get(timeout=20)[0])
        outcomes.append(codes)
    assert outcomes[0] == outcomes[1]
    assert 503 in outcomes[0] and len(outcomes[0]) > 12


# -- watch faults ----------------------------------------------------------------------------


def _watcher(namespace: str, events: queue.Queue,
             lists: list[float]) -> Callable[[Any, threading.Event], None]:
    """An informer in miniature: list, then watch from there; list again whenever the watch ends
    or fails (every list noted in ``lists``, every event and error in ``events``)."""

    def operator(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)

        def pump() -> None:
            while not stop.is_set():
                listed = core.list_namespaced_config_map(namespace)
                lists.append(time.monotonic())
                try:
                    for event in watch.Watch().stream(
                            core.list_namespaced_config_map, namespace,
                            resource_version=listed.metadata.resource_version,
                            timeout_seconds=120):
                        events.put((time.monotonic(), event["type"],
                                    event["object"].metadata.name))
                except ApiException as error:
                    events.put((time.monotonic(), "error", error.status))

        _in_background(pump)
        stop.wait()

    return operator


def test_a_stale_watch_delivers_each_event_no_sooner_than_the_delay(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    events: queue.Queue = queue.Queue()
    lists: list[float] = []
    stale = faults.stale(1.5, resource="configmaps")
    handle = run_operator(_watcher(namespace, events, lists), name="stale")
    eventually(lambda: lists and stale.injected == 1)
    made = time.monotonic()
    k8s.core.create_namespaced_config_map(namespace, config_map("late"))
    at, kind, name = events.get(timeout=10)
    assert (kind, name) == ("ADDED", "late")
    assert 1.5 <= at - made < 3.5
    assert [c.fault for c in api_calls.calls(user=handle, injected=True)] == [
        "watch events held back 1.5 s"]


def test_an_ended_watch_makes_the_operator_list_again(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str) -> None:
    events: queue.Queue = queue.Queue()
    lists: list[float] = []
    dropped = faults.drop_watches(after_events=1, resource="configmaps", times=1)
    run_operator(_watcher(namespace, events, lists), name="dropped")
    eventually(lambda: dropped.matched == 1)
    k8s.core.create_namespaced_config_map(namespace, config_map("one"))
    assert events.get(timeout=10)[1:] == ("ADDED", "one")
    eventually(lambda: len(lists) == 2, message="the operator never listed again")
    assert dropped.injected == 1
    k8s.core.create_namespaced_config_map(namespace, config_map("two"))  # the new watch works
    assert events.get(timeout=10)[1:] == ("ADDED", "two")


def test_a_gone_watch_gets_410_and_the_operator_lists_again(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    events: queue.Queue = queue.Queue()
    lists: list[float] = []
    gone = faults.gone(resource="configmaps", nth=1)
    handle = run_operator(_watcher(namespace, events, lists), name="gone")
    assert events.get(timeout=10)[1:] == ("error", 410)
    eventually(lambda: len(lists) == 2)
    k8s.core.create_namespaced_config_map(namespace, config_map("after"))
    assert events.get(timeout=10)[1:] == ("ADDED", "after")
    assert gone.injected == 1
    assert [(c.verb, c.code) for c in api_calls.calls(user=handle, injected=True)] == [
        ("watch", 410)]


# -- crashes ---------------------------------------------------------------------------------

STEPS = 5
STEPPER = """
import os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what stops it, whatever the runner ignores
from kubernetes import client, config
core = client.CoreV1Api(config.new_client_from_config(config_file=sys.argv[1]))
namespace, steps = sys.argv[2], int(sys.argv[3])
print("started", os.getpid(), flush=True)
have = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
for index in range(1, steps + 1):  # one write per step, each once: a restart goes on from here
    if f"step-{index}" not in have:
        core.create_namespaced_config_map(namespace, {
            "metadata": {"name": f"step-{index}"}, "data": {"pid": str(os.getpid())}})
        print("wrote step", index, flush=True)
signal.pause()
"""


def test_a_process_operator_is_killed_right_after_its_nth_write_and_started_again(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        tmp_path: Path, api_calls: ApiCalls) -> None:
    script = tmp_path / "stepper.py"
    script.write_text(STEPPER)
    crash = faults.crash_after_write(2, resource="configmaps")
    handle = run_operator([sys.executable, str(script), "{kubeconfig}", namespace, str(STEPS)],
                          name="stepper")
    assert isinstance(handle, ProcessOperator)
    eventually(lambda: len(names(k8s.core, namespace)) == STEPS, timeout=30)
    pids = {c.metadata.name: int(c.data["pid"])
            for c in k8s.core.list_namespaced_config_map(namespace).items}
    first, second = pids["step-1"], pids["step-2"]
    assert first == second
    assert {pids[f"step-{i}"] for i in range(3, STEPS + 1)} == {handle.process.pid}
    assert handle.process.pid != first and handle.restarts == 1 and crash.injected == 1
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # SIGKILLed, reaped
    logs = handle.logs()
    # Killed after its second write reached the apiserver, before it heard the answer.
    assert "wrote step 1" in logs and "wrote step 2" not in logs and "wrote step 3" in logs
    assert [line for line in logs.splitlines() if line.startswith("started ")] == [
        f"started {first}", f"started {handle.process.pid}"]
    assert "killed (SIGKILL) by a crash fault" in logs
    assert api_calls.count(user=handle, verb="create", injected=False) == STEPS  # none twice
    crashes = api_calls.calls(user=handle, injected=True)
    assert [(c.verb, c.target, c.name) for c in crashes] == [("crash", "configmaps", "step-2")]
    handle.check()  # the kill was the test's: no crash to report


def test_a_thread_operator_is_stopped_right_after_its_nth_write_and_cannot_write_again(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    instances: list[threading.Event] = []
    heard: dict[str, list[str]] = {}  # the writes each instance heard answered
    late: queue.Queue = queue.Queue()

    def stepper(api_client: Any, stop: threading.Event) -> None:
        instances.append(stop)
        me = str(len(instances))
        heard[me] = []
        core = CoreV1Api(api_client)
        have = names(core, namespace)
        try:
            for index in range(1, STEPS + 1):
                if f"step-{index}" not in have:
                    core.create_namespaced_config_map(namespace,
                                                      config_map(f"step-{index}", by=me))
                    heard[me].append(f"step-{index}")
        except ApiException:
            raise  # an answer from the apiserver (or the proxy): not what a crash gives
        except Exception as error:  # the held answer never comes: the connection is cut
            late.put(("cut", type(error).__name__))
            try:  # a thread cannot be killed: it tries to write once more, and must not
                core.create_namespaced_config_map(namespace, config_map("zombie", by=me))
                late.put(("zombie", 201))
            except ApiException as refused:
                late.put(("zombie", refused.status))
            raise  # and dies of it: the stopped instance's end is not the operator's crash
        stop.wait()

    crash = faults.crash_after_write(2, resource="configmaps")
    handle = run_operator(stepper, name="thread-stepper")
    assert isinstance(handle, ThreadOperator)
    eventually(lambda: len(names(k8s.core, namespace)) == STEPS, timeout=30)
    # the second instance notes its last answer just after the object exists (CI saw it
    # listed before it was noted)
    eventually(lambda: heard.get("2", [])[-1:] == [f"step-{STEPS}"], timeout=10)
    assert late.get(timeout=5)[0] == "cut"
    assert late.get(timeout=5) == ("zombie", 503)
    by = {c.metadata.name: c.data["by"]
          for c in k8s.core.list_namespaced_config_map(namespace).items}
    assert by == {"step-1": "1", "step-2": "1", **{f"step-{i}": "2" for i in range(3, STEPS + 1)}}
    assert heard == {"1": ["step-1"], "2": [f"step-{i}" for i in range(3, STEPS + 1)]}
    assert instances[0].is_set() and not instances[1].is_set()
    assert handle.restarts == 1 and crash.injected == 1
    assert api_calls.count(user=handle, verb="create", injected=False) == STEPS
    handle.check()


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_crash_fault_while_the_operator_stops_starts_no_instance_stop_cannot_see(
        kind: str, faults: Faults, run_operator: RunOperator, namespace: str,
        tmp_path: Path) -> None:
    """An operator that writes once more as it stops (a finalizer, a last status) meets its
    crash fault during stop(): no fresh instance may start behind stop()'s back (it found the
    old one; the new one would run on, and stop() wait for it in vain)."""
    crash = faults.crash_after_write(1, resource="configmaps")
    if kind == "thread":
        def farewell(api_client: Any, stop: threading.Event) -> None:
            stop.wait()  # a last write on the way out, the only one
            CoreV1Api(api_client).create_namespaced_config_map(
                namespace, {"metadata": {"generateName": "farewell-"}})

        handle = run_operator(farewell, name="farewell", stop_timeout=5.0)
    else:
        script = tmp_path / "farewell.py"
        script.write_text(FAREWELL)
        handle = run_operator([sys.executable, str(script), "{kubeconfig}", namespace],
                              name="farewell", stop_timeout=5.0)
        eventually(lambda: "waiting" in handle.logs(), timeout=20)
    started = time.monotonic()
    handle.stop()
    assert time.monotonic() - started < 4.0, "stop() waited for an instance it never stopped"
    assert crash.injected == 1 and handle.restarts == 0
    assert handle.crash() is None  # killed by the fault as it stopped: not a crash


FAREWELL = """
import signal
import sys
import threading

import kubernetes

stopping = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stopping.set())
kubernetes.config.load_kube_config(sys.argv[1])
core = kubernetes.client.CoreV1Api()
print("waiting", flush=True)
stopping.wait()
try:
    core.create_namespaced_config_map(sys.argv[2], {"metadata": {"generateName": "farewell-"}})
except Exception as error:
    print("cut:", type(error).__name__, flush=True)
"""


COPIER = """
import kopf
import kubernetes


@kopf.on.create("configmaps", labels={"copy-me": "yes"})
def copy(name, namespace, **_):
    try:  # through the official client's default, as kopf's login set it for this instance
        kubernetes.client.CoreV1Api().create_namespaced_config_map(
            namespace, {"metadata": {"name": f"{name}-copy"}})
    except kubernetes.client.ApiException as error:
        if error.status != 409:  # made already, before a crash
            raise
"""


def test_a_kopf_thread_operator_started_again_after_a_crash_goes_on_from_there(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        tmp_path: Path, api_calls: ApiCalls) -> None:
    (tmp_path / "copier.py").write_text(COPIER)
    faults.crash_after_write(1, verb="create", resource="configmaps")
    handle = run_operator(KopfOperator(tmp_path / "copier.py", thread=True), name="copier")
    k8s.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "source", "labels": {"copy-me": "yes"}}})
    eventually(lambda: "kopf.zalando.org/last-handled-configuration" in (
        k8s.core.read_namespaced_config_map("source", namespace).metadata.annotations or {}),
               timeout=30, message="the fresh kopf instance never finished the handler")
    assert handle.restarts == 1
    # The first instance made the copy and was killed before it heard so; the fresh one,
    # logged in with its own certificate, tried again and found it made.
    assert [c.code for c in api_calls.calls(user=handle, verb="create", resource="configmaps",
                                            injected=False)] == [201, 409]
    # Once the stopped instance has wound down, the fresh one still works as itself (the
    # client's default configuration is still its own, not the one from before the first).
    eventually(lambda: [t.name for t in threading.enumerate()].count("operator-copier") == 1,
               timeout=30, message="the stopped kopf instance never ended")
    k8s.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "later", "labels": {"copy-me": "yes"}}})
    eventually(lambda: k8s.core.read_namespaced_config_map("later-copy", namespace),
               timeout=30)
    handle.check()


# -- bad input -------------------------------------------------------------------------------


def test_an_unknown_fault_lists_the_valid_ones(faults: Faults) -> None:
    with pytest.raises(ConfigurationError) as raised:
        faults.add("crash-after-writes=3")
    assert str(raised.value) == (
        "unknown fault 'crash-after-writes'; the faults are: conflict, error, throttle, "
        "timeout, refuse, stale, drop-watches, gone, crash-after-write, stale-view, unobserved")
    assert faults.rules == []
    assert str(parse_fault("crash-after-write=3")) == "crash-after-write=3"


pytest_plugins = ["pytester"]

REPORTED = """
import threading

from kubernetes.client import ApiException, CoreV1Api

from envtest import eventually


def test_fails_after_faults(faults, run_operator, k8s, namespace):
    faults.conflict(verb="create", resource="configmaps", nth=1)
    faults.gone(resource="secrets", namespace="nowhere")  # never matches: a warning

    def creator(api_client, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        while not stop.wait(0.05):
            try:
                core.create_namespaced_config_map(namespace, {"metadata": {"name": "made"}})
                break
            except ApiException:
                pass
        stop.wait()

    run_operator(creator, name="reported")
    eventually(lambda: k8s.core.read_namespaced_config_map("made", namespace))
    assert False, "failed on purpose"
"""


def test_injected_faults_are_in_the_failure_and_timeline_reports_and_idle_rules_warn(
        inner_pytester: Any, tmp_path: Path) -> None:
    inner_pytester.makepyfile(test_inner=REPORTED)
    reports = tmp_path / "reports"
    basetemp = tmp_path / "basetemp"
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA",
                                                 f"--envtest-report={reports}",
                                                 f"--basetemp={basetemp}", timeout=300)
    result.assert_outcomes(failed=1)
    # The proxy's keys and its operators' kubeconfigs go with it: pytest keeps basetemp.
    left = [p for p in basetemp.rglob("*") if p.is_file() and (
        p.suffix in (".key", ".kubeconfig") or "proxy" in p.name)]
    assert not left, left
    output = result.stdout.str()
    found = re.search(r"-+ envtest: faults injected -+\n(.*?)\n-{3,} ", output, re.S)
    assert found is not None, output
    section = found.group(1)
    assert "pytest-envtest:reported create configmaps" in section
    assert "409 Conflict [conflict:verb=create,resource=configmaps,nth=1]" in section
    assert "EnvtestWarning: fault gone:resource=secrets,namespace=nowhere never injected" \
        in output
    page = next(reports.glob("*.html")).read_text()
    assert 'class="mark injected"' in page and "409 Conflict" in page and "injected fault" in page


MODES = """
import threading

from envtest import eventually


def host_of(run_operator):
    hosts = []

    def operator(api_client, stop: threading.Event) -> None:
        hosts.append(api_client.configuration.host)
        stop.wait()

    run_operator(operator)
    return eventually(lambda: hosts)[0]


def test_without_faults(run_operator, envtest):
    print("without faults:", host_of(run_operator) == envtest.server)


def test_with_faults(faults, run_operator, envtest):
    print("with faults:", host_of(run_operator) == envtest.server)
"""


@pytest.mark.parametrize(("mode", "direct_without_faults"), [("always", False),
                                                              ("faults", True)])
def test_the_proxy_is_in_front_of_every_operator_or_only_where_faults_are_set(
        mode: str, direct_without_faults: bool, inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_inner=MODES)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s",
                                                 f"--envtest-operator-proxy={mode}",
                                                 timeout=300)
    result.assert_outcomes(passed=2)
    output = result.stdout.str()
    assert f"without faults: {direct_without_faults}" in output
    assert "with faults: False" in output  # behind its proxy either way


def test_a_count_as_without_faults_leaves_out_what_they_caused_and_nothing_else(
        faults: Faults, run_operator: RunOperator, k8s: Clients, namespace: str,
        api_calls: ApiCalls) -> None:
    """A marker's status written by an operator that writes it on every pass: one 409 (its
    retry stands in for it), and a crash after the write that a fresh instance repeats
    unchanged (the repeat is the fault's doing), then one real change.  The counts without
    the faults are the clean ones; the plain counts see every call; the audit log and the
    journal are the independent account of what happened."""
    k8s.core.create_namespaced_config_map(namespace, config_map("marker", step="0"))
    wanted: queue.Queue = queue.Queue()

    def writer(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        while not stop.wait(0.05):
            try:
                step = wanted.get_nowait()
            except queue.Empty:
                continue
            while not stop.is_set():  # until the apiserver answers (a 409: again)
                try:
                    core.patch_namespaced_config_map("marker", namespace,
                                                     {"data": {"step": step}})
                    break
                except ApiException:
                    continue

    faults.conflict(verb="patch", resource="configmaps", nth=1)
    crash = faults.crash_after_write(1, verb="patch", resource="configmaps")
    handle = run_operator(writer, name="marker-writer")
    wanted.put("1")  # a 409, then the write the crash follows
    eventually(lambda: crash.injected == 1 and handle.restarts == 1, timeout=20)
    wanted.put("1")  # the fresh instance repeats the write it never heard answered
    eventually(lambda: api_calls.count(user=handle, verb="patch", injected=False) == 2,
               timeout=20)
    wanted.put("2")  # then a real change
    eventually(lambda: k8s.core.read_namespaced_config_map("marker", namespace).data
               == {"step": "2"}, timeout=20)

    audited = api_calls.calls(user=handle, verb="patch", injected=False)
    injected = api_calls.calls(user=handle, injected=True)
    assert [c.verb for c in injected] == ["patch", "crash"], injected
    assert [c.code for c in audited] == [200, 200, 200], audited
    # The 409's retry (the first audited patch, the one the crash followed) stands for it;
    # its unchanged repeat is left out; the real change counts: as without the faults.
    assert api_calls.count(user=handle, verb="patch", faulted=False) == 2
    left_out = api_calls.calls(user=handle, faulted=True)
    assert [c.audit_id for c in left_out if not c.injected] == [audited[1].audit_id]
    assert api_calls.count(user=handle, verb=["patch", "crash"]) == 5  # every call
