"""No Secret value in anything a run writes or prints, whichever way the Secret was made.

An inner pytest run with ``--envtest-report`` and ``--envtest-artifacts`` plants a
decoy value by every route a Secret's value reaches the cluster or a log: the
framework's ``apply``, the official client (``data``, base64), a
``kubectl.kubernetes.io/last-applied-configuration`` annotation as ``kubectl
apply`` writes it (later changed, so the recorder has a diff of it), and an
operator's log lines (decoded and raw).  Its test fails on purpose, so every
output is written: the failure report, the artifacts (sections, control-plane
logs, audit log), the per-test timeline report and the failing test's timeline.
Then every file the run wrote (the failed test's snapshot too) and everything
it printed is searched for each decoy, plain and base64.
"""

from __future__ import annotations

import base64
import secrets
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

ROUTES = ("apply", "client", "lastapplied", "lastapplied2", "log")

INNER = textwrap.dedent('''
    import base64
    import json
    import logging
    import os

    import kubernetes

    from envtest import eventually

    D = {route: os.environ["DECOY_" + route.upper()] for route in %(routes)r}
    LAST = "kubectl.kubernetes.io/last-applied-configuration"

    def leaky(api_client, stop):
        core = kubernetes.client.CoreV1Api(api_client)
        log = logging.getLogger("leaky")
        secret = core.read_namespaced_secret("by-client", NS[0])
        log.warning("connecting with %%s", base64.b64decode(secret.data["password"]).decode())
        log.warning("raw secret data %%s", secret.data["password"])
        stop.wait()

    NS = []

    def test_leaks_nothing(namespace, apply, k8s, run_operator, recorder):
        NS.append(namespace)
        apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "by-apply"},
               "stringData": {"password": D["apply"]}})
        k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": "by-client"},
            "data": {"password": base64.b64encode(D["client"].encode()).decode()}})
        # What kubectl apply (client side) stores: the manifest, values included, in an
        # annotation; then a second apply changes it, so the recorder diffs the annotation.
        for value in (D["lastapplied"], D["lastapplied2"]):
            manifest = {"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "by-kubectl", "namespace": namespace},
                        "stringData": {"token": value}}
            body = {"metadata": {"name": "by-kubectl",
                                 "annotations": {LAST: json.dumps(manifest)}},
                    "stringData": {"token": value}}
            if value == D["lastapplied"]:
                k8s.core.create_namespaced_secret(namespace, body)
            else:
                k8s.core.patch_namespaced_secret("by-kubectl", namespace, body)
        operator = run_operator(leaky, name="leaky", loggers=["leaky"])
        eventually(lambda: "raw secret data" in operator.logs(), timeout=20)
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "note"},
            "data": {"said": "the operator logged " + D["log"]}})
        assert False, "fail on purpose: every output is written"
''') % {"routes": ROUTES}


def _forms(value: str) -> list[str]:
    return [value, base64.b64encode(value.encode()).decode()]


def test_no_decoy_in_any_output_and_every_file_private(
        own_plane_pytester: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoys = {route: f"decoy-{route}-{secrets.token_hex(6)}" for route in ROUTES}
    # The ConfigMap's value is logged, not a Secret's: it must show (redaction is not blind).
    decoys_in_secrets = {r: v for r, v in decoys.items() if r != "log"}
    for route, value in decoys.items():
        monkeypatch.setenv(f"DECOY_{route.upper()}", value)
    own_plane_pytester.makepyfile(test_inner=INNER)
    reports, artifacts = tmp_path / "reports", tmp_path / "artifacts"
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-report={reports}",
        f"--envtest-artifacts={artifacts}", timeout=300)
    result.assert_outcomes(failed=1)
    printed = result.stdout.str() + result.stderr.str()

    files = [p for root in (reports, artifacts) for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    # Every output was written: the test's timeline, its failure sections, the plane's logs.
    wanted = {"timeline.html", "audit.log", "kube-apiserver.log", "operator_leaky_logs.txt"}
    assert wanted <= names, names
    assert any(p.parent == reports and p.suffix == ".html" for p in files)
    # No exception: the failed test's snapshot holds placeholders (artifacts get uploaded).
    snapshots = [p for p in files if p.name == "objects.json" and p.parent.name == "snapshot"]
    assert len(snapshots) == 1, snapshots
    texts = {str(p.relative_to(tmp_path)): p.read_text(errors="replace") for p in files}
    texts["terminal"] = printed

    # The routes were taken: the report shows the Secrets and the operator's log lines.
    timeline = next(t for name, t in texts.items() if name.endswith("timeline.html"))
    assert "by-kubectl" in timeline and "last-applied-configuration" in timeline
    assert "connecting with &lt;redacted&gt;" in timeline, "the log lane shows the line"
    assert "connecting with <redacted>" in printed
    for route, value in decoys_in_secrets.items():
        for form in _forms(value):
            leaked = [name for name, text in texts.items() if form in text]
            assert not leaked, f"the {route} decoy ({form}) leaked into {leaked}"
    assert decoys["log"] in printed, "a value that is in no Secret is shown as it is"

    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, f"{path} is not 0600"
    for folder in {p.parent for p in files} | {reports, artifacts}:  # all made by the run
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, f"{folder} is not 0700"


UNSEEN = ("rotated", "deleted", "default", "printed", "captured", "looping")

INNER_UNSEEN = textwrap.dedent('''
    import base64
    import logging
    import os

    import kubernetes
    import pytest

    from envtest import eventually

    D = {route: os.environ["DECOY_" + route.upper()] for route in %(routes)r}


    @pytest.fixture
    def in_default(k8s):
        """A Secret in ``default``, there while the test fails (removed after the report)."""
        name = "unseen-" + D["default"][-8:]
        k8s.core.create_namespaced_secret("default", {"metadata": {"name": name},
                                                      "stringData": {"v": D["default"]}})
        yield name
        k8s.core.delete_namespaced_secret(name, "default")


    def test_leaks_nothing(namespace, k8s, run_operator, in_default):
        for route in ("rotated", "deleted", "printed", "captured", "looping"):
            k8s.core.create_namespaced_secret(namespace, {"metadata": {"name": route},
                                                          "stringData": {"v": D[route]}})

        def leaky(api_client, stop):
            core = kubernetes.client.CoreV1Api(api_client)

            def value(name, where=namespace):
                return base64.b64decode(core.read_namespaced_secret(name, where).data["v"]
                                        ).decode()

            log = logging.getLogger("leaky")
            log.warning("rotated %%s", value("rotated"))
            log.warning("deleted %%s", value("deleted"))
            log.warning("default %%s", value(in_default, "default"))
            print("printed", value("printed"), flush=True)
            logging.getLogger("elsewhere").warning("captured %%s", value("captured"))
            log.warning("all told")
            looping = value("looping")
            while not stop.wait(0.005):  # while pytest writes the report, capture suspended
                print("looping", looping, flush=True)

        operator = run_operator(leaky, name="leaky", loggers=["leaky"],
                                groups=["system:masters"])
        eventually(lambda: "all told" in operator.logs(), timeout=20)
        k8s.core.patch_namespaced_secret("rotated", namespace,
                                         {"stringData": {"v": "the-value-it-has-now"}})
        k8s.core.delete_namespaced_secret("deleted", namespace)
        assert False, "fail on purpose: every output is written"
''') % {"routes": UNSEEN}


def test_values_the_report_never_lists_are_scrubbed_too(
        inner_pytester: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording off, the Secrets listed at failure time are the test's namespaces' as they
    are then: before, a value rotated away, a deleted Secret's, one in ``default``, and
    anything a thread operator printed or logged to pytest's capture showed in clear; and a
    thread operator printing while pytest's capture was suspended (the failure report being
    written) put its value on the terminal in clear, 8 lines of it under the test's name."""
    decoys = {route: f"decoy-{route}-{secrets.token_hex(6)}" for route in UNSEEN}
    for route, value in decoys.items():
        monkeypatch.setenv(f"DECOY_{route.upper()}", value)
    inner_pytester.makepyfile(test_unseen=INNER_UNSEEN)
    # Recording off: --envtest-report and --envtest-artifacts record the session's changes
    # (the recorder learns every Secret it sees); the report goes to pytest's basetemp.
    basetemp = tmp_path / "basetemp"
    junit = tmp_path / "junit.xml"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--basetemp={basetemp}", f"--junitxml={junit}",
        "-v", timeout=300)  # -v: every section whole (the looping prints fill the log's tail)
    result.assert_outcomes(failed=1)
    printed = result.stdout.str() + result.stderr.str()
    # Each route was taken: the operator-log section (its prints among its log lines, in
    # every phase), pytest's captured log.
    for line in ("rotated <redacted>", "deleted <redacted>", "default <redacted>",
                 "printed <redacted>", "captured <redacted>", "looping <redacted>"):
        assert line in printed, (line, printed)
    assert "Captured log call" in printed, printed
    assert "INFO stdout [operator-leaky] printed <redacted>" in printed, printed
    files = [p for p in (basetemp / "envtest-reports").rglob("*") if p.is_file()]
    assert any(p.name == "timeline.html" for p in files), files
    texts = {str(p.relative_to(tmp_path)): p.read_text(errors="replace") for p in files}
    texts["terminal"] = printed
    texts["junit"] = junit.read_text()
    for route, value in decoys.items():
        for form in _forms(value):
            leaked = [name for name, text in texts.items() if form in text]
            assert not leaked, f"the {route} decoy ({form}) leaked into {leaked}"


INNER_ASSERTS = textwrap.dedent('''
    import base64
    import os
    import sys

    import kubernetes

    from envtest import eventually

    PRINTER = "import sys, time; print('using', sys.argv[1], flush=True); time.sleep(3600)"


    def test_compares_a_secret(k8s, namespace, run_operator, tmp_path):
        k8s.core.create_namespaced_secret(namespace, {
            "metadata": {"name": "db"},
            "stringData": {"pw": os.environ["DECOY_PW"],
                           "password": os.environ["DECOY_PASSWORD"]}})
        secret = k8s.core.read_namespaced_secret("db", namespace)
        script = tmp_path / "printer.py"
        script.write_text(PRINTER)
        printer = run_operator([sys.executable, str(script), os.environ["DECOY_PASSWORD"]],
                               name="printer")
        eventually(lambda: "using" in printer.logs(), timeout=20)
        word = base64.b64decode(secret.data["pw"]).decode()
        assert word == "something-else", f"the password was {word}"
''')


def test_a_secret_in_the_tests_own_assert_reaches_neither_terminal_nor_junit(
        own_plane_pytester: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's own text of a failed assertion was not redacted (the terminal, junit.xml);
    a command operator's raw log kept what it printed; a plain-word value under ``pw`` was
    kept readable (``pw`` is as much a password's key as ``password``)."""
    decoys = {"pw": "plainword", "password": f"decoy-{secrets.token_hex(6)}"}
    for key, value in decoys.items():
        monkeypatch.setenv(f"DECOY_{key.upper()}", value)
    own_plane_pytester.makepyfile(test_asserts=INNER_ASSERTS)
    junit = own_plane_pytester.path / "junit.xml"
    result = own_plane_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--junitxml={junit}",
        f"--basetemp={own_plane_pytester.path / 'base'}", timeout=180)
    result.assert_outcomes(failed=1)
    printed = result.stdout.str() + result.stderr.str()
    assert "AssertionError: the password was <redacted" in printed, printed[-3000:]
    logs = list((own_plane_pytester.path / "base").rglob("operator-printer.log"))
    assert logs, "the operator's raw log was written"
    texts = {"terminal": printed, "junit.xml": junit.read_text(),
             **{str(p): p.read_text() for p in logs}}
    for key, value in decoys.items():
        for form in _forms(value):
            leaked = [name for name, text in texts.items() if form in text]
            assert not leaked, f"the {key} decoy ({form}) leaked into {leaked}"
