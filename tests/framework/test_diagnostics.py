"""A deliberately failing inner suite (pytester, own process, own control plane) and its report.

One inner run covers: the diagnostics sections of a failed test, the same
written as artifacts, Secret redaction, a thread operator that raises while
the test body passes, a subprocess operator that dies, and a passing test that
gets no diagnostics.
"""

from __future__ import annotations

import base64
import re
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

SECRET_VALUE = base64.b64encode(b"hunter2-do-not-print").decode()

INNER = textwrap.dedent("""
    import logging
    import os
    import sys

    from envtest import eventually


    def test_fails_with_objects_and_an_operator(namespace, k8s, run_operator):
        k8s.core.create_namespaced_config_map(namespace, {
            "metadata": {"name": "diag-config"}, "data": {"colour": "blue"}})
        k8s.core.create_namespaced_secret(namespace, {
            "metadata": {"name": "diag-secret"},
            "data": {"password": os.environ["DIAG_SECRET"]}})  # kept out of the source
        k8s.core.create_namespaced_event(namespace, {
            "metadata": {"name": "diag-event"}, "type": "Warning", "reason": "DiagReason",
            "message": "something worth seeing",
            "involvedObject": {"kind": "ConfigMap", "name": "diag-config",
                                "namespace": namespace}})

        def operator(api_client, stop_event):
            logging.getLogger("diag.operator").info("operator saw diag-config")
            stop_event.wait()

        running = run_operator(operator, name="diag", loggers=["diag.operator"])
        eventually(lambda: "operator saw diag-config" in running.logs(), timeout=10)
        assert False, "deliberate failure"


    def test_operator_raises_while_the_body_passes(run_operator):
        def exploding_operator(api_client, stop_event):
            raise RuntimeError("operator exploded on purpose")

        running = run_operator(exploding_operator, name="exploding")
        running.thread.join(10)  # the body passes; the crash must still fail the test


    def test_process_operator_dies(run_operator):
        run_operator([sys.executable, "-c",
                      "print('process operator going down'); raise SystemExit(3)"],
                     name="dying")
        eventually(lambda: False, timeout=60)  # the watchdog ends this wait at once


    def test_passes(namespace, k8s):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "fine"}})
""")


# pytest's "---- title ----" lines (a log tail's own "--- etcd (path) ---" is content)
HEADER = re.compile(r"^(?:-+ (?:envtest: |Captured )|_+ |=+ )(.+) [-_=]+$")


def section(output: str, title: str) -> str:
    """The text of the first report section whose header contains ``title``."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        match = HEADER.match(line)
        if match and title in match.group(0):
            body = []
            for following in lines[index + 1:]:
                if HEADER.match(following):
                    break
                body.append(following)
            return "\n".join(body)
    raise AssertionError(f"no section {title!r} in the output:\n{output}")


def check_sections_of_the_failed_test(output: str) -> None:
    """Every diagnostics section, with the content a developer looks for first."""
    report = output.split("_ test_fails_with_objects_and_an_operator _")[1].split(
        "_ test_operator_raises_while_the_body_passes _")[0]

    objects = section(report, "envtest: objects in namespace test-fails-with-objects-and-an-")
    assert "name: diag-config" in objects and "colour: blue" in objects
    assert "name: diag-secret" in objects and "password: <redacted>" in objects
    assert "managedFields" not in objects
    events = section(report, "envtest: events in namespace test-fails-with-objects-and-an-")
    assert "DiagReason" in events and "ConfigMap/diag-config: something worth seeing" in events
    calls = section(report, "envtest: API calls during the test")
    assert "envtest-admin" in calls and "configmaps" in calls and "secrets" in calls
    logs = section(report, "envtest: operator diag logs")
    assert "INFO diag.operator" in logs and "operator saw diag-config" in logs
    # The control plane's log tails are in the artifacts (start-up chatter, mostly), which
    # the report names; -v prints them too.
    assert "envtest: control plane log tail" not in report
    folder = Path(section(report, "envtest: artifacts").strip())
    tail = (folder / "control_plane_log_tail.txt").read_text()
    assert "--- kube-apiserver (" in tail and "--- etcd, warnings and errors (" in tail
    assert '"level":"info"' not in tail, "etcd's info lines (raft chatter) crowd the tail"
    assert "AssertionError: deliberate failure" in report
    assert SECRET_VALUE not in output  # anywhere in the whole run's output


def check_raising_operator_fails_a_passing_test(result: pytest.RunResult) -> None:
    """The operator's traceback fails the test although its body passed."""
    output = result.stdout.str()
    report = output.split("_ test_operator_raises_while_the_body_passes _")[1].split(
        "_ test_process_operator_dies _")[0]
    assert "OperatorCrashed: operator 'exploding' crashed" in report
    assert "in exploding_operator" in report  # the operator's traceback
    assert "RuntimeError: operator exploded on purpose" in report
    assert "envtest: operator exploding logs" in report
    assert "FAILED test_inner.py::test_operator_raises_while_the_body_passes" in output


def check_dying_process_operator(output: str) -> None:
    """A subprocess operator's death ends the test's wait at once, with its log tail."""
    report = output.split("_ test_process_operator_dies _")[1]
    assert "operator 'dying' crashed: exit code 3" in report
    assert "process operator going down" in report
    assert "not met within 60 s" not in report  # failed at once, not by timing out


def check_artifacts(output: str, artifacts: Path) -> None:
    """The same diagnostics as files per failed test, plus the control plane's logs."""
    directories = {p.name for p in artifacts.iterdir() if p.is_dir()}
    tests = {d for d in directories if d.startswith("test_inner.py")}
    assert tests == {"test_inner.py_test_fails_with_objects_and_an_operator",
                     "test_inner.py_test_operator_raises_while_the_body_passes",
                     "test_inner.py_test_process_operator_dies"}  # not the passing test
    failed = artifacts / "test_inner.py_test_fails_with_objects_and_an_operator"
    files = {p.name for p in failed.iterdir()}
    assert {"operator_diag_logs.txt", "control_plane_log_tail.txt",
            "api_calls_during_the_test.txt"} <= files
    objects = [f for f in files if f.startswith("objects_in_namespace_test-fails-with-")]
    events = [f for f in files if f.startswith("events_in_namespace_test-fails-with-")]
    assert len(objects) == len(events) == 1
    text = (failed / objects[0]).read_text()
    assert "colour: blue" in text and "password: <redacted>" in text
    assert "DiagReason" in (failed / events[0]).read_text()
    assert "operator saw diag-config" in (failed / "operator_diag_logs.txt").read_text()
    assert "envtest: artifacts" in output and str(failed) in output

    # The control plane's own logs are saved when it stops.
    planes = [d for d in artifacts.iterdir() if d.name.startswith("control-plane-")]
    assert len(planes) == 1
    assert {"kube-apiserver.log", "etcd.log", "audit.log"} <= {p.name for p in
                                                              planes[0].iterdir()}
    for path in artifacts.rglob("*"):
        # Not for humans: the snapshot holds Secret values in clear, for a restore.
        if path.is_file() and path.relative_to(artifacts).parts[1:] != ("snapshot",
                                                                          "objects.json"):
            assert SECRET_VALUE not in path.read_text(errors="replace"), path


def test_failing_inner_suite_reports_diagnostics(own_plane_pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # One inner run (it starts its own control plane) checked from several angles.
    monkeypatch.setenv("DIAG_SECRET", SECRET_VALUE)
    own_plane_pytester.makepyfile(test_inner=INNER)
    artifacts = own_plane_pytester.path / "artifacts"
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-artifacts", str(artifacts), timeout=180)
    result.assert_outcomes(failed=3, passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    check_sections_of_the_failed_test(output)
    check_raising_operator_fails_a_passing_test(result)
    check_dying_process_operator(output)
    check_artifacts(output, artifacts)
