"""The failure report says what explains the failure, briefly, and never what is not so."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]

CRASHES = textwrap.dedent('''
    import time
    import pytest
    from envtest import OperatorCrashed, eventually

    def dies(api_client, stop):
        time.sleep(0.2)
        raise RuntimeError("the operator fell over")

    def test_expects_the_crash(run_operator):
        run_operator(dies, name="dies")
        with pytest.raises(OperatorCrashed, match="fell over"):
            eventually(lambda: False, timeout=20)

    def test_fails_after_the_crash(k8s, namespace, run_operator):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "made"}})
        run_operator(dies, name="dies")
        eventually(lambda: False, timeout=20)
''')


def test_a_crash_the_test_expects_passes_and_a_crash_keeps_the_api_calls(
        inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_inner=CRASHES)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                                 timeout=240)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    after = output.split("envtest: API calls during the test", 1)[1].split("\n", 1)[1]
    calls = after.split(" envtest: ", 1)[0].split("=====", 1)[0]
    assert "could not collect" not in calls and "configmaps" in calls, calls


STALE = textwrap.dedent('''
    import threading
    from envtest import WaitTimeoutError

    def test_stale_condition_error(k8s, namespace, wait_for):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"}})
        threading.Timer(0.3, k8s.core.patch_namespaced_config_map,
                        ("cm", namespace, {"data": {"k": "other"}})).start()
        try:
            wait_for("ConfigMap", "cm", lambda cm: cm.data.k == "wanted", timeout=1.5)
        except WaitTimeoutError as timeout:
            message = str(timeout)
        assert "k: other" in message, message
        assert "has no field" not in message, message
''')


def test_a_wait_timeout_shows_no_stale_condition_error(inner_pytester: Any) -> None:
    inner_pytester.makepyfile(test_inner=STALE)
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1)


NOISY = textwrap.dedent('''
    import kubernetes
    from envtest import eventually

    def chatty(api_client, stop):
        import logging
        log = logging.getLogger("chatty")
        for i in range(200):
            log.warning("reconcile pass %d", i)
        stop.wait()

    def test_fails_in_a_wait(k8s, namespace, run_operator, wait_for):
        operator = run_operator(chatty, name="chatty", loggers=["chatty"])
        eventually(lambda: "pass 199" in operator.logs(), timeout=20)
        for n in range(3):
            k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": f"cm{n}"},
                                                              "data": {"n": str(n)}})
        wait_for("ConfigMap", "cm0", lambda cm: cm.data.n == "9", timeout=0.5)
''')


def test_the_text_report_is_short_and_says_what_explains_the_failure(
        inner_pytester: Any, tmp_path: Path) -> None:
    inner_pytester.makepyfile(test_inner=NOISY)
    artifacts = tmp_path / "artifacts"
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                                 f"--envtest-artifacts={artifacts}", timeout=240)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    failure = output.split("_ test_fails_in_a_wait _", 1)[1].split("short test summary", 1)[0]
    lines = failure.splitlines()
    assert len(lines) <= 180, f"{len(lines)} lines:\n" + "\n".join(lines[:400])
    # What explains it is there: the wait, the objects, the operator's last lines, the calls.
    assert "WaitTimeoutError" in failure and "cm0" in failure
    assert "reconcile pass 199" in failure
    assert "reconcile pass 100" not in failure  # only the last lines
    assert "envtest: API calls during the test" in failure
    # Not the noise: the control plane's start-up lines, the CA ConfigMap of every namespace.
    assert "kube-root-ca.crt" not in failure
    assert "Caches are synced" not in failure
    # Objects read as Kubernetes prints them: apiVersion, kind, metadata first.
    objects = failure.split("envtest: objects in namespace", 1)[1]
    first = [line for line in objects.splitlines()[1:4]]
    assert first[:2] == ["apiVersion: v1", "kind: ConfigMap"], first
    # The rest is in the artifacts, and the report says where.
    full = next(artifacts.rglob("operator_chatty_logs.txt")).read_text()
    assert "reconcile pass 100" in full
    assert str(artifacts) in failure

    verbose = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=240)
    assert "reconcile pass 100" in verbose.stdout.str()  # -v shows everything


KEPT = textwrap.dedent('''
    def test_fails(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "kept"}})
        assert False
''')


def test_keep_failed_writes_the_control_plane_logs_the_docs_promise(
        own_plane_pytester: Any, tmp_path: Path) -> None:
    """debugging.md: --envtest-artifacts writes the full control-plane logs (and audit log)
    to DIR/control-plane-*, also when the cluster is kept (--envtest-keep=failed)."""
    own_plane_pytester.makepyfile(test_inner=KEPT)
    artifacts = tmp_path / "artifacts"
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-keep=failed", f"--envtest-artifacts={artifacts}",
        timeout=240)
    try:
        result.assert_outcomes(failed=1)
        (folder,) = artifacts.glob("control-plane-*")
        assert {"kube-apiserver.log", "etcd.log", "audit.log"} <= {
            p.name for p in folder.iterdir()}
        assert "kept" in (folder / "audit.log").read_text()
    finally:
        workdir = re.search(r"envtest down (\S+)", result.stdout.str())
        if workdir:
            import subprocess
            import sys
            subprocess.run([str(Path(sys.executable).parent / "envtest"), "down",
                            workdir.group(1)], timeout=60, check=False)
