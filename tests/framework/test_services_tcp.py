"""A TCP port behind a Service's name: an operator that speaks its workload's own protocol.

ZooKeeper's operator stores the cluster size in ZooKeeper, through
``<cluster>-client.<ns>.svc.cluster.local:2181``, in ZooKeeper's protocol: no HTTP proxy
carries it.  ``services.serve_tcp`` gives the Service a loopback address of its own and
runs each command operator in a user and mount namespace whose ``/etc/hosts`` names it,
without root.  Real processes here: a Python script (glibc's resolver) and a Go binary
(Go's own resolver, as a Go operator built with CGO_ENABLED=0 has).
"""

from __future__ import annotations

import socketserver
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envtest import eventually
from tests.support.go_operator import GoUnavailable, build_go_operator

pytest_plugins = ["pytester"]


class Pong(socketserver.StreamRequestHandler):
    """A line protocol: ``PING <who>`` answered ``PONG <who>``."""

    def handle(self) -> None:
        line = self.rfile.readline().decode().strip()
        self.wfile.write(f"PONG {line.split(' ', 1)[-1]}\n".encode())


CALLER = textwrap.dedent('''
    import socket, sys, time
    for host in sys.argv[1:]:
        while True:
            try:
                with socket.create_connection((host.rsplit(":", 1)[0], int(host.rsplit(":", 1)[1])),
                                              timeout=5) as s:
                    s.sendall(f"PING {host}\\n".encode())
                    print("answer", s.makefile().readline().strip(), flush=True)
                break
            except OSError as exc:
                print("failed", host, exc, flush=True)
                time.sleep(0.2)
    time.sleep(3600)
''')


def test_a_python_command_reaches_a_tcp_service_by_each_of_its_names(
        namespace: str, run_operator: Any, services: Any, tmp_path: Path) -> None:
    served = services.serve_tcp("db", 5432, handler=Pong)
    assert served.address.startswith("127.") and served.address != "127.0.0.1"
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    names = [f"db.{namespace}.svc.cluster.local:5432", f"db.{namespace}.svc:5432",
             f"db.{namespace}:5432", "db:5432"]
    caller = run_operator([sys.executable, str(script), *names], name="caller")
    eventually(lambda: caller.logs().count("answer PONG") == 4, timeout=20)
    for name in names:
        assert f"answer PONG {name}" in caller.logs(), caller.logs()
    assert served.connections == 4
    # Only in the operator's namespace: the machine's own resolver knows nothing of it.
    import socket
    with pytest.raises(OSError):
        socket.getaddrinfo(f"db.{namespace}.svc.cluster.local", 5432)


GO_CALLER = textwrap.dedent('''
    package main

    import (
        "bufio"
        "fmt"
        "net"
        "os"
        "time"
    )

    func main() {
        for {
            conn, err := net.DialTimeout("tcp", os.Args[1], 5*time.Second)
            if err != nil {
                fmt.Println("failed", err)
                time.Sleep(200 * time.Millisecond)
                continue
            }
            fmt.Fprintf(conn, "ruok\\n")
            answer, _ := bufio.NewReader(conn).ReadString('\\n')
            fmt.Printf("answer %s", answer)
            conn.Close()
            time.Sleep(time.Hour)
        }
    }
''')


@pytest.fixture
def echo_server() -> Iterator[int]:
    """A server of the test's own on 127.0.0.1: echoes the first line, upper-cased."""
    class Echo(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            self.wfile.write(self.rfile.readline().upper())

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_go_binary_reaches_the_tests_own_server_by_a_service_name(
        namespace: str, run_operator: Any, services: Any, tmp_path: Path,
        echo_server: int) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "go.mod").write_text("module caller\n\ngo 1.21\n")
    (source / "main.go").write_text(GO_CALLER)
    try:
        binary = build_go_operator(tmp_path / "bin", source=source)
    except GoUnavailable as missing:
        pytest.skip(str(missing))
    served = services.serve_tcp("zk-client", 2181, target=echo_server)
    caller = run_operator([str(binary), f"zk-client.{namespace}.svc.cluster.local:2181"],
                          name="go-caller")
    eventually(lambda: "answer RUOK" in caller.logs(), timeout=20)
    assert served.connections == 1


def test_a_service_served_after_the_operator_started_is_named_for_it(
        namespace: str, run_operator: Any, services: Any, tmp_path: Path) -> None:
    """The namespace's hosts file is the test's, rewritten in place: a Service served later
    resolves too (a command is wrapped once some Service is served over TCP)."""
    services.serve_tcp("first", 7000, handler=Pong)
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    caller = run_operator([sys.executable, str(script), "first:7000",
                           f"second.{namespace}:7001"], name="caller")
    eventually(lambda: "answer PONG first:7000" in caller.logs(), timeout=20)
    eventually(lambda: "failed second" in caller.logs(), timeout=20)  # not served yet
    services.serve_tcp("second", 7001, handler=Pong)
    eventually(lambda: f"answer PONG second.{namespace}:7001" in caller.logs(), timeout=20)


INNER_REFUSED = textwrap.dedent('''
    import pytest

    from envtest import ConfigurationError


    def test_refused(services):
        with pytest.raises(ConfigurationError) as refused:
            services.serve_tcp("db", 5432, target=1)
        print("MESSAGE", repr(str(refused.value)))
        assert not services.tcp  # nothing listens
''')


def test_where_the_machine_cannot_it_says_what_is_missing_in_one_line(
        inner_pytester: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without util-linux's unshare on PATH (a machine that cannot), one line says so."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    inner_pytester.makepyfile(test_refused=INNER_REFUSED)
    result = inner_pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    [line] = [line.split("MESSAGE ", 1)[1] for line in result.outlines if "MESSAGE" in line]
    assert line.startswith("\"services.serve_tcp('db', 5432): a TCP port behind a "
                           "Service name runs the operator under unshare and mount"), line
    assert "'unshare' is not on PATH: install util-linux" in line and "\\n" not in line
