"""Which log lines say why a component stopped (``system.children.loglines``): known logs."""

from __future__ import annotations

import json

from envtest.system.children.loglines import telling_lines

ETCD = "\n".join(json.dumps({"level": level, "msg": msg}) for level, msg in [
    ("info", "starting an etcd server"), ("warn", "simple token is not signed"),
    ("info", "ready to serve client requests"), ("fatal", "listen tcp: address in use"),
    ("info", "closing")])
KLOG = "\n".join([
    "I1204 18:49:04.287710   12 server.go:1] Version: v1.37.2",
    "W1204 18:49:04.287711   12 authn.go:2] anonymous auth is off",
    "E1204 18:49:05.000000   12 storage.go:3] etcd: connection refused",
    "I1204 18:49:05.100000   12 server.go:4] shutting down",
])


def test_warnings_and_errors_then_the_last_line() -> None:
    shown = telling_lines(ETCD, 20).splitlines()
    assert [json.loads(line)["msg"] for line in shown[:2]] == [
        "simple token is not signed", "listen tcp: address in use"]
    assert shown[2].startswith("(its last line:)") and "closing" in shown[2]
    assert telling_lines(KLOG, 20).splitlines()[:2] == KLOG.splitlines()[1:3]


def test_a_stack_is_kept_and_only_the_last_lines_count() -> None:
    text = "I1204 00:00:00.0 1 a.go:1] fine\npanic: boom\ngoroutine 1 [running]:"
    assert telling_lines(text, 20) == "panic: boom\ngoroutine 1 [running]:"
    assert telling_lines(KLOG, 1).splitlines()[0] == KLOG.splitlines()[2]


def test_nothing_telling_is_empty() -> None:
    assert telling_lines("I1204 00:00:00.0 1 a.go:1] fine\n", 20) == ""


def test_the_start_up_warnings_every_apiserver_logs_explain_no_death() -> None:
    """A dead kube-apiserver's message carried ~20 of these before what killed it."""
    skipped = [f"W1206 08:25:40.1{i:05d}   26383 genericapiserver.go:798] Skipping API "
               f"group{i}.k8s.io/v1beta1 because it has no resources." for i in range(20)]
    text = "\n".join([*skipped, "E1206 08:25:41.0 26383 run.go:72] etcd: context deadline "
                      "exceeded", "F1206 08:25:41.1 26383 server.go:9] storage failed"])
    shown = telling_lines(text, 20).splitlines()
    assert shown == text.splitlines()[-2:]
    assert "Skipping API" not in telling_lines(text, 20)
