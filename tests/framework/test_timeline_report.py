"""The timeline report: written per test with --envtest-report and for failing tests into
the artifacts, rendered by headless Chromium and checked on its DOM."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]

INNER = textwrap.dedent('''
    import logging
    import kubernetes
    import pytest
    from envtest import PodPlan, eventually

    CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "dials.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Dial", "plural": "dials", "singular": "dial"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                      "properties": {"status": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}}}}]}}

    def spammer(api_client, stop):
        api = kubernetes.client.CustomObjectsApi(api_client)
        log = logging.getLogger("spammer")
        for _ in range(4):  # the same status every pass: 3 redundant writes
            dial = api.get_namespaced_custom_object("example.com", "v1", NS[0], "dials", "d")
            dial["status"] = {"level": 3}
            api.replace_namespaced_custom_object_status("example.com", "v1", NS[0], "dials",
                                                        "d", dial)
            log.warning("wrote status level=3")
        stop.wait()

    NS = []

    @pytest.mark.envtest_crds(CRD)
    def test_story(k8s, namespace, run_operator, pod_simulator, recorder, api_calls):
        NS.append(namespace)
        recorder("dials")
        k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace, "dials", {
            "apiVersion": "example.com/v1", "kind": "Dial", "metadata": {"name": "d"}})
        stale = k8s.custom.get_namespaced_custom_object("example.com", "v1", namespace,
                                                        "dials", "d")
        operator = run_operator(spammer, name="spammer", loggers=["spammer"])
        eventually(lambda: api_calls.count(user=operator, subresource="status") == 4,
                   timeout=20)
        stale["status"] = {"level": 1}
        with pytest.raises(kubernetes.client.ApiException):  # a 409 for the report
            k8s.custom.replace_namespaced_custom_object_status("example.com", "v1",
                                                               namespace, "dials", "d", stale)
        simulator = pod_simulator("app=web", PodPlan(running_after=0.1))
        k8s.core.create_namespaced_pod(namespace, {"metadata": {"name": "web",
            "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
        eventually(lambda: simulator.states("web") == ["Running", "Ready"], timeout=10)
        k8s.core.create_namespaced_event(namespace, {  # what an operator records
            "metadata": {"generateName": "d."}, "type": "Warning", "reason": "TooManyWrites",
            "message": "status written 4 times", "involvedObject": {
                "kind": "Dial", "namespace": namespace, "name": "d"},
            "firstTimestamp": None, "lastTimestamp": None})

    def test_fails(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "evidence"}})
        assert False, "on purpose"
''')


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium; "
                    "`make chromium` does it where apt works)")
    return found


def _render(chromium: str, page: Path, screenshot: Path) -> str:
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
              "--user-data-dir=" + str(page.parent / "chromium-profile")]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    subprocess.run([*common, f"--screenshot={screenshot}", "--window-size=1200,900",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    return dom


def test_report_per_test_and_for_failures(inner_pytester: Any, tmp_path: Path) -> None:
    chromium = _chromium()
    inner_pytester.makepyfile(test_inner=INNER)
    reports, artifacts = tmp_path / "reports", tmp_path / "artifacts"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-report={reports}",
        f"--envtest-artifacts={artifacts}")
    result.assert_outcomes(passed=1, failed=1)
    pages = sorted(reports.glob("*.html"))
    assert [p.name for p in pages] == ["test_inner.py_test_fails.html",
                                      "test_inner.py_test_story.html"]
    failing = list(artifacts.glob("*test_fails/timeline.html"))  # a failing test's artifacts
    assert len(failing) == 1
    # --envtest-report records every object of the namespace: the ConfigMap the failing test
    # created is among the changes, though it never asked for a recorder.
    changes = failing[0].read_text().split('<table class="changes">', 1)[1]
    assert "configmaps" in changes and "/evidence" in changes, changes[:2000]

    story = pages[1]
    screenshot = tmp_path / "timeline.png"
    dom = _render(chromium, story, screenshot)
    assert screenshot.stat().st_size > 10_000
    lanes = re.findall(r'<g class="lane" data-lane="([^"]+)"', dom)
    assert "pytest-envtest:spammer" in lanes and "spammer log" in lanes, lanes
    assert {"envtest-admin", "Pod lifecycle", "events"} <= set(lanes), lanes
    assert re.search(r'<b class="redundant">3</b>', dom)  # 4 identical writes: 3 changed nothing
    assert re.search(r'<b class="conflicts">1</b>', dom)
    assert dom.count('class="mark redundant"') == 3
    assert dom.count('class="mark conflict"') == 1
    assert "web -&gt; Ready" in dom
    assert '<table class="summary">' in dom and "dials/status" in dom
    assert "status.level" in dom  # the recorded change, expandable
    # Each write joined to the change it made: the first of the spammer's four set the level,
    # the other three stored nothing; the change's row names its writer.
    assert dom.count("; stored nothing") == 3, dom
    assert re.search(r"update dials/status \S+ -&gt; 200; MODIFIED \d+: status\.level", dom)
    assert dom.count("<td>pytest-envtest:spammer update</td>") == 1  # once, not per recorder


def test_already_exists_is_told_apart_from_a_conflict(k8s: Any, namespace: str,
                                                       api_calls: Any, tmp_path: Path) -> None:
    """Both are 409: a create of a taken name (AlreadyExists) and an update from a stale
    resourceVersion (Conflict) point at different bugs; before, both counted as conflicts."""
    from kubernetes.client.rest import ApiException

    from envtest import TimelineInput, write_report

    made = k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    with pytest.raises(ApiException) as exists:
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    assert exists.value.reason == "Conflict" and "already exists" in exists.value.body
    k8s.core.patch_namespaced_config_map("a", namespace, {"data": {"x": "1"}})
    stale = {"metadata": {"name": "a", "resourceVersion": made.metadata.resource_version}}
    with pytest.raises(ApiException) as conflict:
        k8s.core.replace_namespaced_config_map("a", namespace, stale)
    assert conflict.value.status == 409
    writes = api_calls.calls(resource="configmaps", name="a", writes_only=True)
    assert [(c.verb, c.code) for c in writes] == [
        ("create", 201), ("create", 409), ("patch", 200), ("update", 409)]
    page = write_report(tmp_path / "report.html", TimelineInput("409s", writes=writes))
    html = page.read_text()
    assert '<b class="conflicts">1</b>' in html and '<b class="exists">1</b>' in html
    assert html.count('class="mark exists"') == 1 and html.count('class="mark conflict"') == 1


TIMESTAMPS = textwrap.dedent('''
    import datetime as dt

    import kubernetes
    import pytest
    from envtest import eventually

    CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "clocks.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"kind": "Clock", "plural": "clocks", "singular": "clock"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"status": {}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                      "properties": {"status": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True}}}}}]}}

    def stamper(namespace):
        """The seed's redundant writes: the same status, only its lastUpdateTime new."""
        def run(api_client, stop):
            api = kubernetes.client.CustomObjectsApi(api_client)
            for n in range(4):
                clock = api.get_namespaced_custom_object("example.com", "v1", namespace,
                                                         "clocks", "c")
                clock["status"] = {"ready": False, "lastUpdateTime":
                                   f"2026-12-06T00:00:0{n}Z"}
                api.replace_namespaced_custom_object_status("example.com", "v1", namespace,
                                                            "clocks", "c", clock)
            stop.wait()
        return run

    def story(k8s, namespace, run_operator, api_calls):
        k8s.custom.create_namespaced_custom_object("example.com", "v1", namespace, "clocks", {
            "apiVersion": "example.com/v1", "kind": "Clock", "metadata": {"name": "c"}})
        operator = run_operator(stamper(namespace), name="stamper")
        eventually(lambda: api_calls.count(user=operator, subresource="status") == 4,
                   timeout=20)

    @pytest.mark.envtest_crds(CRD)
    def test_plain(k8s, namespace, run_operator, api_calls):
        story(k8s, namespace, run_operator, api_calls)

    @pytest.mark.envtest_crds(CRD)
    @pytest.mark.envtest_report_noise("*Time")
    def test_marked(k8s, namespace, run_operator, api_calls):
        story(k8s, namespace, run_operator, api_calls)

    @pytest.mark.envtest_crds(CRD)
    @pytest.mark.envtest_report_noise("*Time")
    def test_marked_and_failing(k8s, namespace, run_operator, api_calls):
        story(k8s, namespace, run_operator, api_calls)
        assert False, "on purpose: the failure report judges with the noise too"
''')


def test_the_reports_judge_redundant_writes_with_the_noise_they_are_given(
        inner_pytester: Any, tmp_path: Path) -> None:
    """Writes that changed only a timestamp (the seed's 14 to 16 ``lastUpdateTime`` writes)
    were drawn as ordinary writes: the report judged with no noise, while
    ``api_calls.redundant(noise=["*Time"])`` in the same test found them."""
    inner_pytester.makepyfile(test_inner=TIMESTAMPS)
    reports = tmp_path / "reports"
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-report={reports}", timeout=300)
    result.assert_outcomes(passed=2, failed=1)
    page = {p.name.split("test_")[-1].removesuffix(".html"): p.read_text()
            for p in reports.glob("*.html")}
    # The first write made the status; the three after it changed only lastUpdateTime.
    assert page["plain"].count('class="mark redundant"') == 0, "judged without noise"
    assert page["marked"].count('class="mark redundant"') == 3
    output = result.stdout.str()
    assert "3 of 4 writes of the operators changed nothing a reader sees (noise: *Time)" in \
        output, output
    # The option does it for every test.
    again = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--envtest-report={tmp_path / 'again'}",
        "--envtest-report-noise=*Time", "-k", "plain", timeout=300)
    again.assert_outcomes(passed=1)
    [plain] = (tmp_path / "again").glob("*.html")
    assert plain.read_text().count('class="mark redundant"') == 3
