"""Control planes of a test's own: started ahead of need, handed over, stopped after the test."""

from __future__ import annotations

import json
import re
from typing import Any

import psutil

pytest_plugins = ["pytester"]

INNER = '''
import json, pytest

RESULTS = {}

def _record(name, envtest, k8s):
    k8s.core.create_namespace({"metadata": {"name": "mine-" + name}})
    names = [n.metadata.name for n in k8s.core.list_namespace().items]
    print("RESULT", json.dumps({"name": name, "server": envtest.server,
                                "pids": list(envtest.pids.values()),
                                "others": sorted(n for n in names if n.startswith("mine-"))}))

@pytest.mark.envtest_isolated
def test_one(envtest, k8s):
    _record("one", envtest, k8s)

@pytest.mark.envtest_isolated
def test_two(envtest, k8s):
    _record("two", envtest, k8s)

def test_shared(envtest, k8s, envtest_session):
    assert envtest is envtest_session
    _record("shared", envtest, k8s)

def test_own_by_fixture(make_control_plane, envtest_session):
    own = make_control_plane()
    assert own.server != envtest_session.server
    print("RESULT", json.dumps({"name": "fixture", "server": own.server,
                                "pids": list(own.pids.values()), "others": []}))
'''


def test_isolated_tests_get_fresh_planes_started_ahead_and_stopped(inner_pytester: Any):
    inner_pytester.makepyfile(test_inner=INNER)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", timeout=240)
    result.assert_outcomes(passed=4)
    output = result.stdout.str()
    results = {r["name"]: r for r in (json.loads(m) for m in re.findall(r"RESULT (\{.*\})",
                                                                        output))}
    servers = {name: r["server"] for name, r in results.items()}
    assert len(set(servers.values())) == 4, servers  # each isolated test, its own plane
    # Nothing one test made is seen by another: fresh clusters.
    assert results["one"]["others"] == ["mine-one"] and results["two"]["others"] == ["mine-two"]
    assert results["shared"]["others"] == ["mine-shared"]
    assert re.search(r"envtest: control planes of tests' own: 3 handed over, median wait \d+ ms"
                     r" \(started ahead: 1\)", output), output[-2000:]
    for r in results.values():  # stopped after their test (and the session's at its end)
        assert not [p for p in r["pids"] if psutil.pid_exists(p)
                    and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_no_plane_is_started_ahead_when_no_test_asks(inner_pytester: Any):
    inner_pytester.makepyfile(test_plain="def test_plain(envtest):\n    assert envtest.server\n")
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)
    assert "handed over" not in result.stdout.str()


ORDER = '''
import os, psutil, pytest

def test_shared(envtest_session):
    assert envtest_session.server

@pytest.mark.envtest_isolated
def test_own(envtest, envtest_session):
    started = psutil.Process(envtest.pids["etcd"]).create_time()
    shared = psutil.Process(envtest_session.pids["etcd"]).create_time()
    ready = shared + envtest_session.start_seconds
    print("ORDER", started - ready)
    assert started >= ready - 0.2, (started, shared, ready)
'''


def test_the_plane_started_ahead_starts_once_the_sessions_first_plane_is_up(
        own_plane_pytester: Any) -> None:
    """The two starts do not compete for the cores: the first test's plane is ready sooner
    (bench_controlplane: 1.79 s in pytest against 1.28 s alone when they did)."""
    own_plane_pytester.makepyfile(test_order=ORDER)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p",
                                                     "no:randomly", "-s", timeout=120)
    result.assert_outcomes(passed=2)
    assert "handed over" in result.stdout.str()


DEAD_SPARE = '''
import http.client, os, signal, ssl
from pathlib import Path

import psutil
import pytest

from envtest import eventually


def _spare(envtest, name):
    mine = set(envtest.pids.values())
    return [p for p in psutil.Process().children(recursive=True)
            if p.name() == name and p.pid not in mine]


def _fully_ready(apiserver):
    flags = dict(a[2:].split("=", 1) for a in apiserver.cmdline() if a.startswith("--")
                 and "=" in a)
    workdir = Path(flags["client-ca-file"]).parent
    context = ssl.create_default_context(cafile=str(workdir / "serving-ca.crt"))
    context.load_cert_chain(str(workdir / "user-envtest-admin.crt"),
                            str(workdir / "user-envtest-admin.key"))
    connection = http.client.HTTPSConnection("127.0.0.1", int(flags["secure-port"]),
                                             context=context, timeout=5)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _kill_the_spares(envtest, component):
    # The plane started ahead, once fully ready (its start is over: it waits to be taken).
    eventually(lambda: len(_spare(envtest, "kube-apiserver")) == 1
               and _fully_ready(_spare(envtest, "kube-apiserver")[0]), timeout=60)
    [victim] = _spare(envtest, component)
    victim.send_signal(signal.SIGKILL)
    # Dead and waitable, not reaped (its parent, the pool, reads its exit code). Not "a
    # zombie": a Go program's leader shows Z while its other threads still exit, and until
    # they have, waitpid() (the pool's check) says it runs: the plane was handed over.
    eventually(lambda: os.waitid(os.P_PID, victim.pid,
                                 os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None, timeout=10)


@pytest.mark.envtest_isolated
def test_one_kills_the_spares_etcd(envtest):
    _kill_the_spares(envtest, "etcd")


@pytest.mark.envtest_isolated
def test_two_gets_a_live_plane_and_kills_the_next_spares_apiserver(envtest, k8s):
    assert k8s.core.list_namespace().items
    _kill_the_spares(envtest, "kube-apiserver")


@pytest.mark.envtest_isolated
def test_three_gets_a_live_plane(k8s):
    assert k8s.core.list_namespace().items
'''


def test_a_plane_started_ahead_that_died_is_replaced_not_handed_over(
        own_plane_pytester: Any) -> None:
    """Its etcd dead, then another's kube-apiserver: each is replaced, in one session."""
    own_plane_pytester.makepyfile(test_spare=DEAD_SPARE)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p",
                                                     "no:randomly", timeout=180)
    result.assert_outcomes(passed=3)
    output = result.stdout.str()
    assert re.search(r"2 started ahead died before a test took them \(etcd exited with "
                     r"code -9; kube-apiserver exited with code -9\) and were replaced",
                     output), output[-3000:]
