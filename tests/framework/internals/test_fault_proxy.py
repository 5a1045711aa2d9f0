"""The fault proxy on its own, against the session's real kube-apiserver: what passes through
it unchanged, who the apiserver thinks is asking, what it refuses, and its faults at the HTTP
level (the ``faults`` fixture's tests drive the same through ``run_operator``)."""

from __future__ import annotations

import json
import os
import queue
import ssl
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from kubernetes import watch
from kubernetes.client import ApiException, CoreV1Api

from envtest import Cluster
from envtest.api.faults import Fault, FaultPlan, OperatorProxy, ProxyAuthority
from envtest.system.certs import CertificateAuthority

OPERATOR = "pytest-envtest:proxied"


@pytest.fixture
def plan() -> FaultPlan:
    return FaultPlan()


@pytest.fixture
def proxy(envtest: Cluster, plan: FaultPlan, tmp_path: Path) -> Iterator[OperatorProxy]:
    started = OperatorProxy(ProxyAuthority.of(envtest), plan, tmp_path / "proxy")
    yield started
    started.close()


@pytest.fixture
def core(proxy: OperatorProxy) -> Iterator[CoreV1Api]:
    client = proxy.issue_user(OPERATOR, ("system:masters",)).api_client()
    client.configuration.retries = 0  # what the proxy does, not urllib3's retries of it
    yield CoreV1Api(client)
    client.close()


def config_map(name: str, size: int = 10) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"payload": "x" * size}}


def test_reads_and_writes_pass_unchanged_and_are_audited_as_the_operator(
        envtest, core, k8s, namespace) -> None:
    mark = envtest.audit_log.mark()
    created = core.create_namespaced_config_map(namespace, config_map("a"))
    created.data = {"payload": "y"}
    core.replace_namespaced_config_map("a", namespace, created)
    core.patch_namespaced_config_map("a", namespace, {"data": {"more": "z"}})
    assert k8s.core.read_namespaced_config_map("a", namespace).data == {"payload": "y",
                                                                         "more": "z"}
    core.delete_namespaced_config_map("a", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("a", namespace)
    assert missing.value.status == 404  # the apiserver's own answer, passed on
    calls = envtest.audit_log.calls(since=mark, namespace=namespace)
    assert [(c.user, c.verb, c.code) for c in calls] == [
        (OPERATOR, "create", 201), (OPERATOR, "update", 200), (OPERATOR, "patch", 200),
        (OPERATOR, "delete", 200)]
    assert set(calls[0].groups) == {"system:masters", "system:authenticated"}


def test_a_large_list_passes_whole(core, k8s, namespace) -> None:
    for index in range(40):  # 40 x 100 KB: a 4 MB answer, many chunks
        k8s.core.create_namespaced_config_map(namespace, config_map(f"big-{index}", 100_000))
    through = core.list_namespaced_config_map(namespace)
    direct = k8s.core.list_namespaced_config_map(namespace)
    assert [(c.metadata.name, c.metadata.resource_version) for c in through.items] == [
        (c.metadata.name, c.metadata.resource_version) for c in direct.items]
    assert len(through.items) == 40 and len(through.items[0].data["payload"]) == 100_000


def test_a_write_of_the_largest_object_passes_whole(core, k8s, namespace) -> None:
    """A ConfigMap of 1 MiB (the most kube-apiserver takes) makes a body over 1 MiB, past the
    size aiohttp reads by default."""
    created = core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "largest"}, "data": {"a": "x" * (1024 * 1024 - 1)}})
    assert created.metadata.name == "largest"
    assert len(k8s.core.read_namespaced_config_map("largest", namespace).data["a"]) == \
        1024 * 1024 - 1


def _watch_into(core: CoreV1Api, namespace: str, events: queue.Queue, **options: Any) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    try:
        for event in watch.Watch().stream(core.list_namespaced_config_map, namespace,
                                          resource_version=start, **options):
            events.put((time.monotonic(), event["type"], event["object"].metadata.name))
    except ApiException as error:
        events.put((time.monotonic(), "raised", error.status))
    except Exception as error:  # cut: the proxy closed it (a killed instance, the test's end)
        events.put((time.monotonic(), "cut", type(error).__name__))
    events.put((time.monotonic(), "ended", ""))


def test_watch_events_arrive_one_by_one_as_they_happen(core, k8s, namespace) -> None:
    events: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_into, args=(core, namespace, events), daemon=True,
                     kwargs={"timeout_seconds": 30, "allow_watch_bookmarks": True}).start()
    time.sleep(0.5)  # the watch is open (nothing to wait on: it has no event yet)
    for index in range(3):  # the next is made only once the last arrived: nothing buffered
        made = time.monotonic()
        k8s.core.create_namespaced_config_map(namespace, config_map(f"w{index}"))
        at, kind, name = events.get(timeout=5)
        assert (kind, name) == ("ADDED", f"w{index}")
        assert at - made < 1.0


def test_rbac_judges_the_operator(proxy, namespace) -> None:
    client = proxy.issue_user("pytest-envtest:nobody", ()).api_client()
    try:
        with pytest.raises(ApiException) as refused:
            CoreV1Api(client).list_namespaced_config_map(namespace)
    finally:
        client.close()
    assert refused.value.status == 403
    assert 'User "pytest-envtest:nobody" cannot list resource "configmaps"' in \
        json.loads(refused.value.body)["message"]


def _raw_client(proxy: OperatorProxy, user: Any) -> httpx.Client:
    context = ssl.create_default_context(cafile=str(user.credentials.ca_path))
    context.load_cert_chain(str(user.credentials.cert_path), str(user.credentials.key_path))
    return httpx.Client(base_url=proxy.url, verify=context, timeout=10)


def test_the_operators_own_impersonation_is_refused_and_upgrades_go_to_the_apiserver(
        proxy, namespace) -> None:
    user = proxy.issue_user(OPERATOR, ())
    with _raw_client(proxy, user) as client:
        answer = client.get(f"/api/v1/namespaces/{namespace}/configmaps",
                            headers={"Impersonate-User": "someone-mightier"})
        assert answer.status_code == 403
        assert "refuses Impersonate-* headers" in answer.json()["message"]
        assert len(proxy.plan.refusals) == 1
        # An upgrade is the apiserver's to answer (before: 501 from the proxy): a user
        # without rights gets RBAC's refusal, naming the user and the subresource.
        answer = client.post(f"/api/v1/namespaces/{namespace}/pods/p/exec",
                             headers={"Connection": "Upgrade", "Upgrade": "websocket"})
        assert answer.status_code == 403, answer.text
        message = answer.json()["message"]
        assert OPERATOR in message and "pods/exec" in message, message


def test_only_the_planes_client_certificates_get_in_on_loopback_only(envtest, proxy,
                                                                      tmp_path) -> None:
    anonymous = ssl.create_default_context(cafile=str(envtest.pki.serving_ca_path))
    with pytest.raises(httpx.HTTPError), httpx.Client(verify=anonymous) as client:
        client.get(f"{proxy.url}/version")
    stranger = CertificateAuthority("someone else's CA").issue_client("intruder")
    cert, key = stranger.write(tmp_path, "intruder")
    context = ssl.create_default_context(cafile=str(envtest.pki.serving_ca_path))
    context.load_cert_chain(str(cert), str(key))
    with pytest.raises(httpx.HTTPError), httpx.Client(verify=context) as client:
        client.get(f"{proxy.url}/version")
    listening = [c.laddr for c in psutil.Process().net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == proxy.port]
    assert [address.ip for address in listening] == ["127.0.0.1"]


def test_keys_and_kubeconfigs_are_private(proxy) -> None:
    user = proxy.issue_user(OPERATOR, ())
    files = [user.kubeconfig_path, user.credentials.key_path,
             *proxy.directory.glob("*.key")]
    assert len(files) == 3
    assert {stat.S_IMODE(os.stat(f).st_mode) for f in files} == {0o600}


# -- faults at the HTTP level ----------------------------------------------------------------


def test_a_conflict_is_answered_without_forwarding(plan, core, k8s, namespace) -> None:
    k8s.core.create_namespaced_config_map(namespace, config_map("c"))
    rule = plan.add(Fault("conflict", verb="update", resource="configmaps", nth=1))
    current = core.read_namespaced_config_map("c", namespace)
    current.data = {"payload": "changed"}
    with pytest.raises(ApiException) as refused:
        core.replace_namespaced_config_map("c", namespace, current)
    assert refused.value.status == 409
    assert "injected by pytest-envtest" in refused.value.body
    stored = k8s.core.read_namespaced_config_map("c", namespace)
    assert stored.metadata.resource_version == current.metadata.resource_version
    core.replace_namespaced_config_map("c", namespace, current)  # the second goes through
    assert (rule.matched, rule.injected) == (2, 1)


def test_a_throttle_says_when_to_come_back(plan, proxy, namespace) -> None:
    plan.add(Fault("throttle", seconds=2, resource="configmaps"))
    with _raw_client(proxy, proxy.issue_user(OPERATOR, ("system:masters",))) as client:
        answer = client.post(f"/api/v1/namespaces/{namespace}/configmaps",
                             json=config_map("t"))
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "2"
    assert answer.json()["details"]["retryAfterSeconds"] == 2
    assert answer.json()["reason"] == "TooManyRequests"


def test_a_timeout_holds_the_request_then_answers_504(plan, core, k8s, namespace) -> None:
    plan.add(Fault("timeout", seconds=1.0, verb="create"))
    started = time.monotonic()
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, config_map("slow"))
    assert refused.value.status == 504
    assert time.monotonic() - started >= 1.0
    assert k8s.core.list_namespaced_config_map(namespace).items == []


def test_a_stale_watch_delivers_each_event_late(plan, core, k8s, namespace) -> None:
    plan.add(Fault("stale", seconds=1.5, resource="configmaps"))
    events: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_into, args=(core, namespace, events),
                     kwargs={"timeout_seconds": 30}, daemon=True).start()
    time.sleep(0.5)  # the watch is open
    made = [time.monotonic()]
    k8s.core.create_namespaced_config_map(namespace, config_map("s0"))
    time.sleep(0.5)  # the second change half a second after the first
    made.append(time.monotonic())
    k8s.core.create_namespaced_config_map(namespace, config_map("s1"))
    arrived = [events.get(timeout=10) for _ in range(2)]
    assert [name for _, _, name in arrived] == ["s0", "s1"]
    for (at, _, _), sent in zip(arrived, made, strict=True):
        assert 1.5 <= at - sent < 3.0  # each held 1.5 s from its own arrival, not more


def test_a_dropped_watch_ends_after_its_events(plan, core, k8s, namespace) -> None:
    plan.add(Fault("drop-watches", after_events=2, resource="configmaps"))
    events: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_into, args=(core, namespace, events),
                     kwargs={"timeout_seconds": 60}, daemon=True).start()
    time.sleep(0.5)
    for index in range(3):
        k8s.core.create_namespaced_config_map(namespace, config_map(f"d{index}"))
    seen = [events.get(timeout=10)[1:] for _ in range(3)]
    assert seen == [("ADDED", "d0"), ("ADDED", "d1"), ("ended", "")]


def test_a_gone_watch_gets_410_expired(plan, core, namespace) -> None:
    rule = plan.add(Fault("gone", resource="configmaps"))
    events: queue.Queue = queue.Queue()
    _watch_into(core, namespace, events, timeout_seconds=30)
    assert events.get(timeout=1)[1:] == ("raised", 410)
    assert rule.injected == 1
    assert "410" in plan.journal.text()


def test_a_crash_holds_the_answer_and_shuts_the_instance_out(plan, proxy, k8s,
                                                             namespace) -> None:
    killed: list[str] = []
    proxy.on_crash = killed.append
    plan.add(Fault("crash-after-write", nth=2, resource="configmaps"))
    old = proxy.issue_user(OPERATOR, ("system:masters",)).api_client()
    old.configuration.retries = 0
    core = CoreV1Api(old)
    core.create_namespaced_config_map(namespace, config_map("first"))
    with pytest.raises(Exception) as cut:
        core.create_namespaced_config_map(namespace, config_map("second"))
    assert "closed connection without response" in str(cut.value)
    assert len(killed) == 1
    with pytest.raises(ApiException) as refused:  # the killed instance cannot write again
        core.create_namespaced_config_map(namespace, config_map("third"))
    assert refused.value.status == 503
    fresh = CoreV1Api(proxy.issue_user(OPERATOR, ("system:masters",)).api_client())
    fresh.create_namespaced_config_map(namespace, config_map("fourth"))
    assert sorted(c.metadata.name for c in k8s.core.list_namespaced_config_map(
        namespace).items) == ["first", "fourth", "second"]
    assert [e.verb for e in plan.journal.entries] == ["crash"]
    old.close()
    fresh.api_client.close()


def test_a_killed_instances_open_watches_are_cut(plan, proxy, k8s, namespace) -> None:
    proxy.on_crash = lambda serial: None
    plan.add(Fault("crash-after-write", nth=1, resource="secrets"))
    client = proxy.issue_user(OPERATOR, ("system:masters",)).api_client()
    client.configuration.retries = 0
    core = CoreV1Api(client)
    events: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_into, args=(core, namespace, events),
                     kwargs={"timeout_seconds": 60}, daemon=True).start()
    time.sleep(0.5)
    with pytest.raises(Exception):  # noqa: B017 (the connection is cut: urllib3's error)
        core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}})
    assert events.get(timeout=5)[1] == "cut"
    client.close()


def test_a_faulted_watch_of_a_client_that_takes_gzip_is_cut_into_events(
        plan, proxy, k8s, namespace) -> None:
    """Go's client asks for gzip, and kube-apiserver compresses watches: events can only be
    cut apart (held back, counted) in an uncompressed stream, which the proxy asks for."""
    plan.add(Fault("drop-watches", after_events=1, resource="configmaps"))
    k8s.core.create_namespaced_config_map(namespace, config_map("present"))
    path = (f"/api/v1/namespaces/{namespace}/configmaps?watch=true&allowWatchBookmarks=true"
            "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=30")
    with _raw_client(proxy, proxy.issue_user(OPERATOR, ("system:masters",))) as client, \
            client.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as answer:
        body = answer.read()
    assert "content-encoding" not in answer.headers
    events = [json.loads(line) for line in body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "present")]  # ended after one event, long before its timeout
