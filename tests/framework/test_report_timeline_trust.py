"""The timeline report places what happened where it happened, for any operator.

An inner run with ``--envtest-report``: a command operator prints one line in each log
format operators print (zap console and JSON, klog, logfmt, kopf's and Python
logging's defaults, Go's log, an epoch, and a line with no time at all), each a second
after the previous; an Event is created right after a write; a Pod is moved by the
``pods`` helper (no simulator, no engine); a second test fails in a wait.  The report's
marks (their lanes and offsets) are read back from the HTML.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

pytest_plugins = ["pytester"]

PRINTER = textwrap.dedent('''
    import datetime as dt, json, sys, time
    t0 = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(seconds=30)
    def at(i):
        return t0 + dt.timedelta(seconds=i)
    def local(i):
        return at(i).astimezone()
    lines = [
        at(0).strftime("%Y-%m-%dT%H:%M:%S.000Z") + "\\tINFO\\tcontroller\\tStarting workers",
        json.dumps({"level": "info", "ts": at(1).timestamp(), "logger": "c", "msg": "zap json"}),
        json.dumps({"level": "error", "ts": at(2).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                    "msg": "zap json iso"}),
        local(3).strftime("I%m%d %H:%M:%S.000000") + "   4242 controller.go:42] klog line",
        "time=" + at(4).strftime("%Y-%m-%dT%H:%M:%S.000Z") + ' level=info msg="logfmt line"',
        "[" + local(5).strftime("%Y-%m-%d %H:%M:%S,000") + "] kopf.objects         "
        "[INFO    ] [ns/x] Handler 'create' succeeded.",
        local(6).strftime("%Y-%m-%d %H:%M:%S,000") + " INFO root: python logging",
        local(7).strftime("%Y/%m/%d %H:%M:%S") + " go log line",
        "%.3f epoch line" % at(8).timestamp(),
        "a line with no time at all",
    ]
    for line in lines:
        print(line, flush=True)
    time.sleep(600)
''')

INNER = textwrap.dedent('''
    import sys
    from pathlib import Path

    from envtest import eventually

    PRINTER = Path(__file__).with_name("printer.py")

    def test_story(k8s, namespace, run_operator, pods):
        operator = run_operator([sys.executable, str(PRINTER)],
                                name="a-rather-long-operator-name-for-lanes-one")
        run_operator([sys.executable, "-c", "import time; time.sleep(600)"],
                     name="a-rather-long-operator-name-for-lanes-two")
        eventually(lambda: "no time at all" in operator.logs(), timeout=20)
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "cause"}})
        k8s.core.create_namespaced_event(namespace, {
            "metadata": {"generateName": "cause."}, "type": "Normal", "reason": "Caused",
            "message": "after the ConfigMap", "involvedObject": {
                "kind": "ConfigMap", "namespace": namespace, "name": "cause"},
            "firstTimestamp": None, "lastTimestamp": None})
        k8s.core.create_namespaced_pod(namespace, {"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}})
        pods.set_running("web")

    def test_waits_in_vain(k8s, namespace, wait_for):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "there"}})
        wait_for("ConfigMap", "never", lambda cm: True, timeout=0.5)
''')

_MARK = re.compile(r'<circle class="mark (?P<css>[\w-]+)" data-lane="(?P<lane>[^"]*)"[^>]*>'
                   r"<title>(?P<offset>[+-][\d.]+) s (?P<tip>[^<]*)</title>")


def _marks(html: str) -> list[dict[str, Any]]:
    return [{**m.groupdict(), "offset": float(m["offset"])} for m in _MARK.finditer(html)]


def test_logs_events_pods_and_the_failure_are_where_they_happened(inner_pytester: Any,
                                                                   tmp_path: Path) -> None:
    inner_pytester.makepyfile(test_inner=INNER)
    (inner_pytester.path / "printer.py").write_text(PRINTER)
    reports = tmp_path / "reports"
    result = inner_pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                                 f"--envtest-report={reports}", timeout=300)
    result.assert_outcomes(passed=1, failed=1)
    story = (reports / "test_inner.py_test_story.html").read_text()
    marks = _marks(story)

    # Every format's line is on the operator's log lane, a second apart, in order.
    log_lane = "a-rather-long-operator-name-for-lanes-one log"
    logs = [m for m in marks if m["lane"] == log_lane]
    assert len(logs) == 10, [m["tip"] for m in logs]
    stamped = logs[:9]
    pairs = zip(stamped[:-1], stamped[1:], strict=True)
    gaps = [round(b["offset"] - a["offset"], 2) for a, b in pairs]
    assert gaps == [1.0] * 8, [(m["offset"], m["tip"]) for m in stamped]
    assert "no time at all" in logs[9]["tip"] and logs[9]["offset"] > stamped[-1]["offset"] + 20
    assert logs[2]["css"] == "log-error"  # zap's "error" level
    # Lane labels are cut where they differ, never into two identical strings.
    labels = re.findall(r'<g class="lane" data-lane="[^"]*"><text[^>]*>([^<]*)<', story)
    assert len(labels) == len(set(labels)), labels

    # The Event is placed where its create reached the apiserver: after the write before it.
    (event,) = [m for m in marks if m["lane"] == "events"]
    (cause,) = [m for m in marks if "create configmaps" in m["tip"] and "/cause" in m["tip"]]
    assert event["offset"] >= cause["offset"], (event, cause)
    # The Pod lane, though neither a simulator nor the engine moved the Pod.
    pod_states = [m["tip"] for m in marks if m["lane"] == "Pod lifecycle"]
    assert any("web -&gt; Running" in tip for tip in pod_states), pod_states

    # The failing test's report: the wait's span and the moment of the failure are drawn.
    failed = (reports / "test_inner.py_test_waits_in_vain.html").read_text()
    assert re.search(r'<rect class="span [\w-]+"[^>]*><title>wait_for ConfigMap never', failed)
    failure = [m for m in _marks(failed) if m["lane"] == "test"]
    assert [m["css"] for m in failure] == ["failed"] and "WaitTimeoutError" in failure[0]["tip"]
    writes = [m for m in _marks(failed) if "create configmaps" in m["tip"]]
    assert failure[0]["offset"] >= writes[0]["offset"] + 0.5  # the axis reaches the failure
