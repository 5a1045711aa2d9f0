"""Keeping what failed (--envtest-keep=failed|always) and a report that starts at the test's line.

Inner pytest sessions (pytester, in a subprocess) are the user's run; this test checks what
they leave behind and print, then stops what they kept with ``envtest down``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import kubernetes
import psutil
import pytest

from envtest import api_client_from_kubeconfig, eventually

pytest_plugins = ["pytester"]
ENVTEST_CLI = Path(sys.executable).parent / "envtest"

INNER = textwrap.dedent('''
    def test_fails_leaving_evidence(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "evidence"}})
        print("FAILED_NS", namespace)
        assert False, "fail on purpose"

    def test_passes(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "gone"}})
        print("PASSED_NS", namespace)
''')


def _down(workdir: str) -> None:
    subprocess.run([str(ENVTEST_CLI), "down", workdir], capture_output=True, text=True,
                   timeout=60, check=True)


def test_keep_failed_keeps_the_cluster_and_the_failed_tests_namespace(own_plane_pytester: Any):
    own_plane_pytester.makepyfile(test_inner=INNER)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-rA",
                                                 "--envtest-keep=failed", timeout=180)
    output = result.stdout.str()
    workdir_match = re.search(r"stop it with: envtest down (\S+)", output)
    assert workdir_match, output[-3000:]
    workdir = workdir_match.group(1)
    try:
        result.assert_outcomes(failed=1, passed=1)
        failed_ns = re.search(r"FAILED_NS (\S+)", output).group(1)  # type: ignore[union-attr]
        passed_ns = re.search(r"PASSED_NS (\S+)", output).group(1)  # type: ignore[union-attr]
        assert output.count("control plane left running at") == 1, "once per kept cluster"
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", output).group(1)  # type: ignore[union-attr]
        assert re.search(r"kubectl: \S+", output)
        assert f"namespaces of failed tests, kept: {failed_ns}" in output

        client = api_client_from_kubeconfig(kubeconfig)
        try:
            core = kubernetes.client.CoreV1Api(client)
            assert core.read_namespaced_config_map("evidence", failed_ns).metadata.name
            names = {n.metadata.name for n in core.list_namespace().items}
            assert passed_ns not in names, "a passing test's namespace is cleaned up as always"
        finally:
            client.close()
        state = (Path(workdir) / "detached.json").read_text()
        pids = [int(p) for p in re.findall(r'": (\d+)', state)]
        assert pids and all(psutil.pid_exists(pid) for pid in pids)
    finally:
        _down(workdir)
    assert not Path(workdir).exists()
    eventually(lambda: not [p for p in pids if psutil.pid_exists(p)
                            and psutil.Process(p).status() != psutil.STATUS_ZOMBIE], timeout=10)


def test_keep_failed_keeps_nothing_when_everything_passed(inner_pytester: Any):
    inner_pytester.makepyfile(test_inner=INNER.split("def test_passes")[0].replace(
        'assert False, "fail on purpose"', "pass"))
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s",
                                                 "--envtest-keep=failed", timeout=180)
    result.assert_outcomes(passed=1)
    assert "left running" not in result.stdout.str()


def test_a_bad_keep_value_is_a_usage_error(inner_pytester: Any):
    inner_pytester.makepyfile(test_inner="def test_nothing():\n    pass\n")
    result = inner_pytester.runpytest_subprocess("--envtest-keep=sometimes", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--envtest-keep=sometimes: choose one of never, failed, always" in result.stderr.str()


def test_a_bad_record_value_is_a_usage_error(inner_pytester: Any):
    inner_pytester.makepyfile(test_inner="def test_nothing():\n    pass\n")
    result = inner_pytester.runpytest_subprocess("--envtest-record=everything", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--envtest-record=everything: choose one of namespace, off" in result.stderr.str()


REPORTED = textwrap.dedent('''
    from envtest import eventually

    def idle_operator(api_client, stop):
        import logging
        logging.getLogger("idle").warning("idle operator here")
        stop.wait()

    def test_waits_on_a_deployment_that_never_comes(run_operator, wait_for):
        run_operator(idle_operator)
        wait_for("Deployment", "never", lambda d: d.status.readyReplicas == 1, timeout=0.5)

    def test_a_bug_in_a_condition(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"},
                                                          "data": {"a": "1"}})
        eventually(lambda: k8s.core.read_namespaced_config_map("c", namespace).data["b"])
''')


def test_the_report_starts_at_the_tests_line_and_names_the_operator(inner_pytester: Any):
    inner_pytester.makepyfile(test_reported=REPORTED)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert "envtest: operator logs" in output and "operator operator logs" not in output
    assert "idle operator here" in output
    # Tracebacks show the tests' lines, not the framework's wait helpers.
    for hidden in ("envtest/system/polling.py", "envtest/api/objects/waiting.py",
                   "envtest/pytest_plugin/fixtures_"):  # any fixture module
        assert hidden not in output, hidden
    assert 'wait_for("Deployment", "never"' in output
    assert "KeyError: 'b'" in output and "only 'not yet' errors are retried" in output
