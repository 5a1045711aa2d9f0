"""A component of the session's cluster dies mid-test: that test fails fast with the death,
its report is written in seconds, and the run goes on on a fresh cluster."""

from __future__ import annotations

import json
import os
import re
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from framework_helpers import machine_busy
from kubernetes.client import CoreV1Api

from envtest import ControlPlane, ProcessExitedError, eventually, wait_for

pytest_plugins = ["pytester"]

#: Times each test from the end of its setup to the end of its report and teardown.
TIMING = textwrap.dedent('''
    import json, os, time

    STARTED = {}

    def pytest_runtest_logstart(nodeid, location):
        STARTED[nodeid] = time.monotonic()

    def pytest_runtest_logreport(report):
        if report.when == "setup":  # the first test's setup starts the session's cluster
            STARTED[report.nodeid] += report.duration
            with open(os.environ["TIMINGS"], "a") as out:
                out.write(json.dumps([report.nodeid + " setup", report.duration]) + "\\n")

    def pytest_runtest_logfinish(nodeid, location):
        with open(os.environ["TIMINGS"], "a") as out:
            out.write(json.dumps([nodeid, time.monotonic() - STARTED[nodeid]]) + "\\n")
''')

INNER = textwrap.dedent('''
    import os
    import signal

    def _dies(envtest, namespace, k8s, victim):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "before"}})
        os.kill(envtest.pids[victim], signal.SIGKILL)
        # A raw client call on the dead cluster: without help, a minute of waiting.
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "after"}})
        k8s.core.list_namespaced_config_map(namespace)

    def _lives(namespace, k8s):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "fine"}})

    def test_a_etcd_dies(envtest, namespace, k8s):
        _dies(envtest, namespace, k8s, "etcd")

    def test_b_first_after(namespace, k8s):
        _lives(namespace, k8s)

    def test_c_second_after(namespace, k8s, wait_for):
        _lives(namespace, k8s)
        wait_for("ConfigMap", "fine", lambda cm: True)

    def test_d_kube_apiserver_dies(envtest, namespace, k8s):
        _dies(envtest, namespace, k8s, "kube-apiserver")

    def test_e_first_after(namespace, k8s):
        _lives(namespace, k8s)

    def test_f_second_after(namespace, k8s):
        _lives(namespace, k8s)
''')

#: The tests of INNER that kill a component, by the component.
DYING = {"etcd": "test_a_etcd_dies", "kube-apiserver": "test_d_kube_apiserver_dies"}


def test_a_dead_component_fails_one_test_fast_and_the_run_goes_on(
        own_plane_pytester: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """etcd dies in one test, and kube-apiserver in a later one, in one session."""
    timings = tmp_path / "timings.jsonl"
    monkeypatch.setenv("TIMINGS", str(timings))
    own_plane_pytester.makeconftest(TIMING)
    own_plane_pytester.makepyfile(test_inner=INNER)
    artifacts = tmp_path / "artifacts"
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", f"--envtest-artifacts={artifacts}",
        timeout=240)
    result.assert_outcomes(failed=2, passed=4)
    output = result.stdout.str()
    took = dict(json.loads(line) for line in timings.read_text().splitlines())
    # Their warnings and errors, not their start-up chatter (info lines of either log).
    assert "ready to serve client requests" not in output, output[-3000:]
    assert not re.search(r"^E? *I\d{4} \d\d:\d\d", output, re.M), output[-3000:]
    assert output.count("the next test gets a fresh cluster") >= 2, output[-3000:]
    assert output.count("envtest: cluster died") >= 2, output[-3000:]
    assert "ConnectionRefusedError" not in output and "ReadTimeoutError" not in output

    for victim, dying_test in DYING.items():
        # The test that saw the death fails with it: the component, its exit code, its log.
        assert f"ProcessExitedError: {victim} exited with code -9" in output, output[-4000:]
        assert f"{victim} exited with code -9; last warnings and errors of" in output
        assert f"{victim}.log" in output
        # Its report says what died and what it did not collect, and it came fast.
        assert f"{victim} exited with code -9 at" in output
        # Without the death watch the raw call alone waits a minute: 10 s tells it apart,
        # 30 s on a machine loaded past its cores (11.2 s at load 21 on 2 cores).
        dying = took[f"test_inner.py::{dying_test}"]
        assert dying < (30 if machine_busy() else 10), \
            f"{dying_test} took {dying:.1f} s, report included"
        assert (artifacts / f"test_inner.py_{dying_test}" / "cluster_died.txt").exists()
        # The end of the run says a cluster died, which component, when and in which test.
        assert any("a cluster died:" in line and f"{victim} exited with code -9 at" in line
                   and f"during test_inner.py::{dying_test}" in line
                   for line in output.splitlines()), output[-3000:]
    assert "not collected" in output

    # The next test's setup starts a fresh cluster; after it, tests cost what they cost.
    rest = [took[f"test_inner.py::test_{n}"] for n in
            ("b_first_after", "c_second_after", "e_first_after", "f_second_after")]
    assert all(t < 3 for t in rest), f"the tests after the deaths took {rest} s"
    # The fresh cluster's start is all their setup costs: nothing waits on the dead one (its
    # namespace deletions once retried a refused connection for 60 s, one run in three).
    setups = [took[f"test_inner.py::test_{n} setup"] for n in ("b_first_after", "e_first_after")]
    assert all(t < 20 for t in setups), f"the first tests after the deaths set up in {setups} s"


INNER_OWN_PLANE = textwrap.dedent('''
    import os
    import signal

    from envtest import ProcessExitedError, eventually, wait_for

    def test_a_kills_the_session_apiserver(envtest):
        os.kill(envtest.pids["kube-apiserver"], signal.SIGKILL)
        eventually(lambda: False, timeout=10)  # the death fails it

    def test_b_waits_on_a_plane_of_its_own(make_control_plane):
        own = make_control_plane()
        eventually(lambda: True, timeout=5)
        wait_for(own.api_client(), "Namespace", "default", lambda ns: True, timeout=5)
''')


def test_a_dead_session_plane_does_not_fail_waits_on_a_healthy_one(own_plane_pytester: Any) -> None:
    own_plane_pytester.makepyfile(test_inner=INNER_OWN_PLANE)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                                 "-rA", timeout=240)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert "PASSED test_inner.py::test_b_waits_on_a_plane_of_its_own" in output, output[-3000:]
    assert "kube-apiserver exited with code -9" in output


@pytest.fixture
def doomed(make_control_plane: Any) -> ControlPlane:
    """Killed on purpose: a control plane of the test's own."""
    return make_control_plane()


@pytest.mark.parametrize("victim", ["kube-apiserver", "etcd"])
def test_wait_for_on_a_dead_component_says_which_died(doomed: ControlPlane, victim: str) -> None:
    api = doomed.api_client()
    CoreV1Api(api).create_namespace({"metadata": {"name": "waits"}})
    os.kill(doomed.pids[victim], signal.SIGKILL)
    eventually(lambda: doomed.died() is not None, timeout=10, watchdogs=False)
    started = time.monotonic()
    with pytest.raises(ProcessExitedError) as died:
        wait_for(api, "ConfigMap", "never", lambda cm: True, namespace="waits", timeout=30)
    assert died.value.name == victim and died.value.exit_code == -signal.SIGKILL
    assert time.monotonic() - started < 2


INNER_500 = textwrap.dedent('''
    import os
    import signal

    from kubernetes.client import ApiException

    def test_a_500_as_etcd_dies(envtest):
        os.kill(envtest.pids["etcd"], signal.SIGKILL)
        # kube-apiserver answers 500 for want of its etcd before the exit can be seen.
        raise ApiException(status=500, reason="Internal Server Error")
''')


def test_a_server_error_as_etcd_dies_fails_with_the_death(own_plane_pytester: Any) -> None:
    own_plane_pytester.makepyfile(test_inner=INNER_500)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "ProcessExitedError: etcd exited with code -9" in output, output[-3000:]
    assert "the test then failed with ApiException: (500)" in output, output[-3000:]
