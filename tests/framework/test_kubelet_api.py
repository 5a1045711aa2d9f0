"""The simulated Nodes' kubelet API: the real kube-apiserver serves Pod logs from it."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from typing import Any

import psutil
import pytest
from framework_helpers import KUBECTL
from kubernetes.client.rest import ApiException

import envtest
from envtest import PodPlan, eventually

pytestmark = pytest.mark.envtest_profile("cluster")


def _pod(name: str, containers: tuple[str, ...] = ("c",)) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": name}},
            "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]}}


def _ready(wait_for: Any, name: str) -> Any:
    return wait_for("Pod", name, lambda p: any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in p.status.get("conditions") or []), timeout=30)


def _kubelet_port(k8s: envtest.Clients) -> int:
    node = k8s.core.list_node(label_selector="pytest-envtest/node").items[0]
    return int(node.status.daemon_endpoints.kubelet_endpoint.port)


def test_logs_are_one_line_per_transition_by_default(apply, wait_for, k8s, namespace,
                                                     kubelet) -> None:
    apply(_pod("web"))
    _ready(wait_for, "web")
    assert k8s.core.read_namespaced_pod_log("web", namespace) == "started\nready\n"


def test_nodes_report_loopback_and_the_served_port(apply, wait_for, k8s, namespace,
                                                    kubelet) -> None:
    apply(_pod("web"))
    pod = _ready(wait_for, "web")
    node = k8s.core.read_node(pod.spec.nodeName)
    assert [(a.type, a.address) for a in node.status.addresses] == [
        ("InternalIP", "127.0.0.1"), ("Hostname", node.metadata.name)]
    assert pod.status.hostIP == "127.0.0.1"  # a kubelet's Pods get its InternalIP
    port = node.status.daemon_endpoints.kubelet_endpoint.port
    assert port != 10250
    assert any(c.laddr.port == port and c.status == psutil.CONN_LISTEN
               for c in psutil.Process().net_connections(kind="tcp"))


def test_plan_lines_follow_started_and_a_job_logs_its_exit(apply, wait_for, k8s, namespace,
                                                             kubelet) -> None:
    kubelet.plan("t=job", PodPlan(outcome="succeeded", logs=("hello", "world")))
    apply(_pod("job"))
    wait_for("Pod", "job", lambda p: p.status.get("phase") == "Succeeded", timeout=30)
    assert k8s.core.read_namespaced_pod_log("job", namespace) == (
        "started\nhello\nworld\nterminated with exit code 0\n")


def test_a_container_is_named_among_several(apply, wait_for, k8s, namespace, kubelet) -> None:
    apply(_pod("two", ("a", "b")))
    _ready(wait_for, "two")
    kubelet.log("two", "only in b", container="b")
    assert k8s.core.read_namespaced_pod_log("two", namespace, container="a") == (
        "started\nready\n")
    assert k8s.core.read_namespaced_pod_log("two", namespace, container="b") == (
        "started\nready\nonly in b\n")


def test_tail_lines_since_seconds_and_timestamps(apply, wait_for, k8s, namespace,
                                                 kubelet) -> None:
    apply(_pod("web"))
    _ready(wait_for, "web")
    for index in range(5):
        kubelet.log("web", f"line {index}")
    assert k8s.core.read_namespaced_pod_log("web", namespace, tail_lines=2) == (
        "line 3\nline 4\n")
    assert k8s.core.read_namespaced_pod_log("web", namespace, tail_lines=0) == ""
    stamped = k8s.core.read_namespaced_pod_log("web", namespace, timestamps=True,
                                               tail_lines=1)
    stamp, text = stamped.rstrip("\n").split(" ", 1)
    assert text == "line 4"
    assert stamp.endswith("Z") and len(stamp) == len("2026-01-01T00:00:00.000000000Z")
    # sinceSeconds counts whole seconds back from now: wait until the lines are older.
    eventually(lambda: k8s.core.read_namespaced_pod_log("web", namespace,
                                                        since_seconds=1) == "",
               timeout=10, message="lines older than 1 s left out")
    kubelet.log("web", "fresh")
    assert k8s.core.read_namespaced_pod_log("web", namespace, since_seconds=1) == "fresh\n"


def test_previous_serves_the_run_before_a_restart(apply, wait_for, k8s, namespace,
                                                  kubelet) -> None:
    kubelet.plan("t=crash", PodPlan(outcome="crashloop", crash_every=0.1, max_crashes=1,
                                    exit_code=3))
    apply(_pod("crash"))
    wait_for("Pod", "crash", lambda p: p.status.containerStatuses[0].restartCount == 1,
             timeout=30)
    assert k8s.core.read_namespaced_pod_log("crash", namespace, previous=True) == (
        "started\nterminated with exit code 3\n")  # a crash loop is never Ready
    assert k8s.core.read_namespaced_pod_log("crash", namespace) == "started\n"


def test_previous_without_a_restart_is_refused(apply, wait_for, k8s, namespace,
                                               kubelet) -> None:
    apply(_pod("web"))
    _ready(wait_for, "web")
    with pytest.raises(ApiException) as refused:
        k8s.core.read_namespaced_pod_log("web", namespace, previous=True)
    assert "previous terminated container" in str(refused.value.body)


def test_follow_streams_a_line_that_arrives_later(apply, wait_for, k8s, namespace,
                                                  kubelet) -> None:
    apply(_pod("web"))
    _ready(wait_for, "web")
    response = k8s.core.read_namespaced_pod_log("web", namespace, follow=True,
                                                _preload_content=False)
    try:
        lines = response.stream(amt=None)
        assert next(lines) == b"started\nready\n"
        kubelet.log("web", "later")  # written after the stream served what there was
        assert next(lines) == b"later\n"
    finally:
        response.close()  # not back to the pool: the stream goes on


def test_follow_ends_when_the_container_stops(apply, wait_for, k8s, namespace,
                                              kubelet) -> None:
    kubelet.plan("t=job", PodPlan(outcome="succeeded", finish_after=1.5))
    apply(_pod("job"))
    wait_for("Pod", "job", lambda p: p.status.get("phase") == "Running", timeout=30)
    text = k8s.core.read_namespaced_pod_log("job", namespace, follow=True,
                                            _request_timeout=20)
    assert text == "started\nterminated with exit code 0\n"
    # It ended when the container did, and not before: the Pod is done by now.
    assert k8s.core.read_namespaced_pod(  # the status write follows the last line at once
        "job", namespace).status.phase in ("Running", "Succeeded")
    wait_for("Pod", "job", lambda p: p.status.get("phase") == "Succeeded", timeout=10)


@pytest.mark.skipif(not (KUBECTL.exists() or shutil.which("kubectl")), reason="no kubectl")
def test_kubectl_logs(apply, wait_for, kubeconfig, namespace, kubelet) -> None:
    kubelet.plan("t=web", logs=("serving on :8080",))
    apply(_pod("web"))
    _ready(wait_for, "web")
    kubectl = str(KUBECTL) if KUBECTL.exists() else str(shutil.which("kubectl"))
    done = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "-n", namespace, "logs",
                           "web", "--tail", "1"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ready\n", "")


def test_the_kubelet_api_wants_the_apiservers_client_certificate(envtest, k8s,
                                                                 kubelet) -> None:
    port = _kubelet_port(k8s)
    ca = envtest.admin.credentials.ca_path
    anonymous = ssl.create_default_context(cafile=str(ca))  # trusts the server, no cert
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)) as refused:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=anonymous,
                               timeout=10).read()
    assert not isinstance(refused.value, urllib.error.HTTPError)  # no HTTP: no handshake
    # A certificate of the cluster's client CA, but not the apiserver's: forbidden.
    # (The apiserver's own is the one kube-apiserver uses: every other test here.)
    someone = envtest.add_user("someone", ("system:masters",))
    with pytest.raises(urllib.error.HTTPError) as forbidden:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz",
                               context=someone.credentials.ssl_context(), timeout=10)
    assert forbidden.value.code == 403


def test_nothing_listens_beyond_loopback(k8s, kubelet) -> None:
    port = _kubelet_port(k8s)
    listening = [c for c in psutil.Process().net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN]
    assert port in {c.laddr.port for c in listening}
    assert all(c.laddr.ip in ("127.0.0.1", "::1") for c in listening), listening
    others = [a.address for addresses in psutil.net_if_addrs().values() for a in addresses
              if a.family == socket.AF_INET and not a.address.startswith("127.")]
    for address in others:  # not on another address of this machine
        with socket.socket() as probe:
            probe.settimeout(2)
            assert probe.connect_ex((address, port)) != 0, address
