"""An operator's calls to the workloads it runs reach what the test serves, by the Service's
name, its ClusterIP or a Pod's IP, from a Go binary, a Python command, kopf and a thread.

Without the ``services`` fixture none of these names resolves on this machine (no cluster
DNS), so every test here fails without it: the Go order keeper never charges its order (no
receipt), the command prints only errors, the thread's call raises.  What the fixture says
of the calls is checked against what the served app itself saw and what the operator logged.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes.client import ApiException, V1ConfigMap, V1ObjectMeta

from envtest import Clients, KopfOperator, OperatorHandle, eventually
from tests.support.go_operator import GoUnavailable, build_go_operator

pytest_plugins = ["pytester"]
RunOperator = Callable[..., OperatorHandle]
ORDER = "order-1"


@pytest.fixture(scope="module")
def order_keeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_go_operator(tmp_path_factory.mktemp("go-operator"))
    except GoUnavailable as missing:
        pytest.skip(str(missing))


def make_service(k8s: Clients, namespace: str, name: str, port: int,
                 selector: dict[str, str] | None = None, target_port: int | None = None
                 ) -> Any:
    """A ClusterIP Service (its ClusterIP allocated by the apiserver)."""
    return k8s.core.create_namespaced_service(namespace, {
        "metadata": {"name": name},
        "spec": {"ports": [{"name": "http", "port": port, "targetPort": target_port or port}],
                 **({"selector": selector} if selector else {})}})


class Billing:
    """A WSGI app that charges orders and remembers each request it got."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"],
                          environ.get("HTTP_HOST", "")))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"charged"]


def receipt_exists(k8s: Clients, namespace: str) -> bool:
    try:
        k8s.core.read_namespaced_config_map(f"{ORDER}-receipt", namespace)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True


def test_a_go_binary_reaches_a_service_by_name_refused_until_it_is_up(
        k8s: Clients, namespace: str, run_operator: RunOperator, services: Any,
        order_keeper: Path) -> None:
    make_service(k8s, namespace, "billing", 8080)
    billing = Billing()
    served = services.serve("billing", port=8080, app=billing, up=False)
    keeper = run_operator([str(order_keeper), "--kubeconfig", "{kubeconfig}", "--namespace",
                           namespace, "--billing",
                           f"http://billing.{namespace}.svc.cluster.local:8080"],
                          name="order-keeper")
    k8s.core.create_namespaced_config_map(namespace, V1ConfigMap(
        metadata=V1ObjectMeta(name=ORDER, labels={"order": "open"})))
    eventually(lambda: services.count("billing", outcome="refused") >= 2, timeout=20)
    assert not receipt_exists(k8s, namespace)  # a refused charge makes no receipt
    served.up()
    eventually(lambda: receipt_exists(k8s, namespace), timeout=20)

    # What the app saw, what the fixture says and what the operator logged agree.
    host = f"billing.{namespace}.svc.cluster.local:8080"
    assert billing.seen == [("POST", f"/charge/{ORDER}", host)]
    (call,) = services.calls("billing", outcome="served")
    assert (call.method, call.path, call.status, call.operator, call.service) == (
        "POST", f"/charge/{ORDER}", 200, "pytest-envtest:order-keeper", f"{namespace}/billing")
    assert served.calls[-1] == call
    logs = keeper.logs()
    assert f"charged order {ORDER}: charged" in logs
    refused = services.count("billing", outcome="refused")
    failed_charges = [line for line in logs.splitlines() if "charge: Post" in line]
    assert len(failed_charges) == refused, (refused, failed_charges)


COMMAND = textwrap.dedent('''
    import sys, time, urllib.request
    while True:
        for url in sys.argv[1:]:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    print(url, "->", answer.status, answer.read().decode(), flush=True)
            except Exception as exc:
                print(url, "failed:", exc, flush=True)
        time.sleep(0.2)
''')


class Pong(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = f"pong {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_python_command_reaches_a_service_by_short_name_and_cluster_ip(
        k8s: Clients, namespace: str, run_operator: RunOperator, services: Any,
        tmp_path: Path) -> None:
    service = make_service(k8s, namespace, "pinger", 9000)
    services.serve("pinger", port="http", handler=Pong)
    script = tmp_path / "caller.py"
    script.write_text(COMMAND)
    by_name = f"http://pinger.{namespace}.svc:9000/by-name"
    by_ip = f"http://{service.spec.cluster_ip}:9000/by-ip"
    caller = run_operator([sys.executable, str(script), by_name, by_ip], name="caller")
    eventually(lambda: f"{by_ip} -> 200 pong /by-ip" in caller.logs(), timeout=20)
    assert f"{by_name} -> 200 pong /by-name" in caller.logs()
    served = services.calls("pinger", outcome="served")
    assert {call.path for call in served} == {"/by-name", "/by-ip"}
    assert {call.service for call in served} == {f"{namespace}/pinger"}


KOPF_HANDLERS = textwrap.dedent('''
    """A kopf operator that asks its ledger Service for each order's entry (by name)."""
    import urllib.request

    import kopf


    @kopf.on.create("", "v1", "configmaps", labels={"order": kopf.PRESENT})
    def record(name, namespace, patch, **_):
        url = f"http://ledger.{namespace}.svc.cluster.local:8080/entries/{name}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            patch.metadata.annotations["example.com/ledger"] = answer.read().decode()
''')


def test_a_kopf_process_reaches_a_service_by_name(k8s: Clients, namespace: str,
                                                  run_operator: RunOperator, services: Any,
                                                  tmp_path: Path) -> None:
    """kopf run as a process (its own aiohttp client to the apiserver kept direct by
    NO_PROXY), its handler's urllib call to the Service by its DNS name served by the test."""
    make_service(k8s, namespace, "ledger", 8080)
    services.serve("ledger", port=8080, handler=Pong)
    handlers = tmp_path / "ledger_handlers.py"
    handlers.write_text(KOPF_HANDLERS)
    run_operator(KopfOperator(handlers), name="ledger-keeper")
    k8s.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "o-7", "labels": {"order": "open"}}})

    def annotation() -> str | None:
        found = k8s.core.read_namespaced_config_map("o-7", namespace)
        return (found.metadata.annotations or {}).get("example.com/ledger")

    assert eventually(annotation, timeout=30) == "pong /entries/o-7"
    (call,) = services.calls("ledger", outcome="served")
    assert (call.method, call.path, call.operator) == (
        "GET", "/entries/o-7", "pytest-envtest:ledger-keeper")


@pytest.mark.filterwarnings("ignore:.*nothing serves")  # the warning: see the report test
def test_a_thread_operator_is_handed_its_proxy_and_unserved_calls_say_how_to_serve(
        k8s: Clients, namespace: str, run_operator: RunOperator, services: Any) -> None:
    make_service(k8s, namespace, "search", 9200)
    make_service(k8s, namespace, "forgotten", 80)
    answers: list[tuple[int, str]] = []
    done = threading.Event()

    async def search(scope: dict[str, Any], receive: Any, send: Any) -> None:  # ASGI
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": f"indexed {scope['path']}".encode()})

    services.serve("sea*", port=9200, app=search)
    proxy = services.proxy_url("indexer")

    def indexer(api_client: Any, stop: threading.Event) -> None:
        with httpx.Client(proxy=proxy, timeout=10) as client:
            for url in (f"http://search.{namespace}.svc.cluster.local:9200/docs/1",
                        f"http://forgotten.{namespace}:80/x"):
                answer = client.put(url, content=b"{}")
                answers.append((answer.status_code, answer.text))
        done.set()
        stop.wait()

    run_operator(indexer, name="indexer")
    assert done.wait(20)
    assert answers[0] == (201, "indexed /docs/1")
    status, text = answers[1]
    assert status == 502
    assert f"nothing serves {namespace}/forgotten port http" in text
    assert "services.serve('forgotten', port=80" in text
    (unserved,) = services.calls(outcome="unserved")
    assert unserved.operator == "pytest-envtest:indexer" and unserved.status == 502


def test_fault_rules_answer_calls_as_they_answer_requests(
        k8s: Clients, namespace: str, run_operator: RunOperator, services: Any,
        faults: Any) -> None:
    make_service(k8s, namespace, "billing", 8080)
    services.serve("billing", port=8080, app=Billing())
    error = faults.add("error=503:verb=call,resource=services,name=billing,nth=1")
    refuse = faults.add("refuse:verb=call,resource=services,name=billing,nth=2")
    proxy = services.proxy_url("payer")
    got: list[object] = []

    def payer(api_client: Any, stop: threading.Event) -> None:
        with httpx.Client(proxy=proxy, timeout=10) as client:
            while not stop.is_set():
                try:
                    answer = client.post(f"http://billing.{namespace}:8080/charge/x")
                    got.append(answer.status_code)
                    if answer.status_code == 200:
                        break
                except httpx.TransportError:
                    got.append("refused")
        stop.wait()

    run_operator(payer, name="payer")
    eventually(lambda: 200 in got, timeout=20)
    assert got == [503, "refused", 200]
    assert [c.outcome for c in services.calls("billing")] == ["faulted", "faulted", "served"]
    assert (error.injected, refuse.injected) == (1, 1)
    journal = [(e.request.verb, e.request.subresource, e.code) for e in faults.journal.entries]
    assert journal == [("call", "POST /charge/x", 503), ("call", "POST /charge/x", 0)]


@pytest.mark.envtest_profile("cluster")
def test_pod_plan_ports_serve_a_service_and_a_pod_ip(
        apply: Any, wait_for: Any, k8s: Clients, namespace: str, kubelet: Any,
        services: Any) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pong)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kubelet.plan("app=dash", ports={8265: server.server_port})
        make_service(k8s, namespace, "dash", 80, selector={"app": "dash"}, target_port=8265)
        proxy = services.proxy_url("watcher")
        with httpx.Client(proxy=proxy, timeout=10) as client:
            # No Ready Pod behind the Service yet: refused, as a Service without endpoints.
            with pytest.raises(httpx.TransportError):
                client.get(f"http://dash.{namespace}:80/early")
            apply({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "dash-0", "labels": {"app": "dash"}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}})
            pod = wait_for("Pod", "dash-0", lambda p: any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in p.status.get("conditions") or []), timeout=30)
            by_service = client.get(f"http://dash.{namespace}.svc.cluster.local/api")
            by_pod_ip = client.get(f"http://{pod.status.podIP}:8265/ip")
        assert (by_service.status_code, by_service.text) == (200, "pong /api")
        assert (by_pod_ip.status_code, by_pod_ip.text) == (200, "pong /ip")
        assert [(c.outcome, c.service) for c in services.calls()] == [
            ("refused", f"{namespace}/dash"), ("served", f"{namespace}/dash"),
            ("served", f"{namespace}/dash")]
        assert "no Ready Pod behind" in services.calls()[0].detail
    finally:
        server.shutdown()
        server.server_close()


def test_serve_names_what_it_takes(services: Any) -> None:
    with pytest.raises(Exception, match="give exactly one of app="):
        services.serve("x", port=80)
    with pytest.raises(Exception, match="give exactly one of app="):
        services.serve("x", app=Billing(), target=8080)


def test_without_the_proxy_a_service_name_does_not_resolve_here(namespace: str) -> None:
    """What the tests above rely on: no resolver of this machine knows a Service's name."""
    done = subprocess.run(
        [sys.executable, "-c", "import socket, sys; socket.getaddrinfo(sys.argv[1], 80)",
         f"billing.{namespace}.svc.cluster.local"], capture_output=True, text=True, timeout=30)
    assert done.returncode != 0, done.stdout

REPORTED = textwrap.dedent('''
    import httpx
    from envtest import eventually

    def app(environ, start_response):
        start_response("200 OK", [])
        return [b"ok"]

    def test_fails_after_its_calls(k8s, namespace, run_operator, services):
        k8s.core.create_namespaced_service(namespace, {
            "metadata": {"name": "dash"}, "spec": {"ports": [{"port": 8265}]}})
        served = services.serve("dash", port=8265, app=app, up=False)
        proxy = services.proxy_url("op")

        def op(api_client, stop):
            with httpx.Client(proxy=proxy, timeout=10) as client:
                for path in ("/a", "/b", "/c"):
                    try:
                        client.get(f"http://dash.{namespace}:8265{path}")
                    except httpx.TransportError:
                        served.up()
                client.get(f"http://other.{namespace}:80/x")
            stop.wait()

        run_operator(op, name="op")
        eventually(lambda: services.count() == 4, timeout=20)
        assert False, "fails for its report"
''')


def test_calls_are_in_the_failure_report_the_timeline_and_a_warning(
        inner_pytester: Any, tmp_path: Path) -> None:
    from test_report_timeline_trust import _marks

    inner_pytester.makepyfile(test_inner=REPORTED)
    reports = tmp_path / "reports"
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                                 f"--envtest-report={reports}", timeout=240)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    section = output.split("envtest: calls to services", 1)[1].split("envtest: ", 1)[0]
    lines = [line for line in section.splitlines() if "pytest-envtest:op" in line]
    assert [line.split(" -> ")[1].split(" ")[0] for line in lines] == [
        "refused", "200", "200", "502"], section
    assert "nothing serves" in output and "services.serve('other', port=80" in output
    html = (reports / "test_inner.py_test_fails_after_its_calls.html").read_text()
    calls = [m for m in _marks(html) if m["lane"] == "pytest-envtest:op"]
    assert [m["css"] for m in calls] == ["failed", "request", "request", "failed"], calls
    assert "GET http://dash." in calls[1]["tip"] and "/b -&gt; 200" in calls[1]["tip"]


def test_exploration_faults_each_call_and_finds_the_double_charge(inner_pytester: Any,
                                                                   order_keeper: Path) -> None:
    """A clean run's calls become ``errors`` points named by the call (method, path, Service):
    a charge answered 500 or refused is charged again on the next tick, once (the served app
    counts the charges it got).  The bugs it finds are the order keeper's own: an order whose
    receipt's create, or whose marking done, fails after a successful charge is tried again
    from the charge, so it is charged twice."""
    inner_pytester.makepyfile(test_billing=textwrap.dedent(f'''
        from envtest import eventually

        BINARY = {str(order_keeper)!r}


        def test_billing(run_operator, k8s, namespace, services):
            SEEN = []

            def billing(environ, start_response):
                SEEN.append(environ["PATH_INFO"])
                start_response("200 OK", [])
                return [b"charged"]

            k8s.core.create_namespaced_service(namespace, {{
                "metadata": {{"name": "billing"}}, "spec": {{"ports": [{{"port": 8080}}]}}}})
            services.serve("billing", port=8080, app=billing)
            run_operator([BINARY, "--kubeconfig", "{{kubeconfig}}", "--namespace", namespace,
                          "--billing", f"http://billing.{{namespace}}.svc:8080"])
            k8s.core.create_namespaced_config_map(
                namespace, {{"metadata": {{"name": "order-1", "labels": {{"order": "open"}}}}}})
            eventually(lambda: k8s.core.read_namespaced_config_map(
                "order-1", namespace).metadata.labels["order"] == "done", timeout=10)
            faulted = [c for c in services.calls() if c.outcome == "faulted"]
            assert len(SEEN) == 1, (SEEN, faulted)  # each faulted charge was charged again
            print("calls:", [c.outcome for c in services.calls()])
    '''))
    summary = inner_pytester.path / "explored.json"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-s", "--envtest-explore=errors",
        f"--envtest-explore-json={summary}", timeout=300)
    output = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "explored errors: 4 point(s): 2 bugs, 2 passed" in output, output
    assert output.count("calls: ['faulted', 'served']") == 2, output  # the two call points
    assert "BUG 500 on the 1st create of configmaps order-1-receipt" in output, output
    assert "(['/charge/order-1', '/charge/order-1'], [])" in output, output
    (test,) = json.loads(summary.read_text())["tests"]
    verdicts = {o["point"]["label"]: o["verdict"] for o in test["outcomes"]}
    assert verdicts == {
        "500 on the 1st call POST /charge/order-1 to billing": "passed",
        "the 1st call POST /charge/order-1 to billing refused": "passed",
        "500 on the 1st create of configmaps order-1-receipt": "bug",
        "500 on the 1st patch of configmaps order-1": "bug"}, verdicts
