"""Fault rules as data: how a request is read, which rules select it, when they fire, and
the text form ``--envtest-fault`` will take.  No cluster: these are the proxy's decisions."""

from __future__ import annotations

import threading
import time

import pytest

from envtest.api.faults import Fault, FaultPlan, parse_fault, parse_request
from envtest.api.faults.requestinfo import RequestInfo, with_body
from envtest.api.faults.rules import KINDS
from envtest.api.faults.wire.watchstream import Framer
from envtest.controlplane.access.receipts import answered_uid, answered_version
from envtest.errors import ConfigurationError


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ns/pods/p", {}, ("get", "", "pods", "", "ns", "p")),
    ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"},
     ("watch", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/watch/namespaces/ns/pods", {}, ("watch", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/pods", {"watch": "1", "fieldSelector": "metadata.name=p"},
     ("watch", "", "pods", "", "", "p")),
    ("PUT", "/apis/ray.io/v1/namespaces/ns/rayservices/r/status", {},
     ("update", "ray.io", "rayservices", "status", "ns", "r")),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", {},
     ("patch", "apps", "deployments", "scale", "ns", "d")),
    ("POST", "/api/v1/namespaces/ns/configmaps", {}, ("create", "", "configmaps", "", "ns", "")),
    ("DELETE", "/api/v1/namespaces/ns/configmaps", {},
     ("deletecollection", "", "configmaps", "", "ns", "")),
    ("DELETE", "/api/v1/namespaces/ns", {}, ("delete", "", "namespaces", "", "ns", "ns")),
    ("PUT", "/api/v1/namespaces/ns/finalize", {},
     ("update", "", "namespaces", "finalize", "ns", "ns")),
    ("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {},
     ("list", "rbac.authorization.k8s.io", "clusterroles", "", "", "")),
])
def test_requests_read_as_the_audit_log_names_them(method, path, query, expected) -> None:
    info = parse_request(method, path, query)
    assert info is not None
    assert (info.verb, info.api_group, info.resource, info.subresource, info.namespace,
            info.name) == expected


@pytest.mark.parametrize("path", ["/api", "/apis", "/apis/ray.io/v1", "/version", "/openapi/v3",
                                  "/healthz", "/api/v1"])
def test_discovery_and_health_are_not_resource_requests(path: str) -> None:
    assert parse_request("GET", path, {}) is None


def test_a_create_is_named_by_its_body_unless_it_is_not_json() -> None:
    info = parse_request("POST", "/api/v1/namespaces/ns/configmaps", {})
    assert info is not None
    assert with_body(info, b'{"metadata": {"name": "a"}}').name == "a"
    assert with_body(info, b'{"metadata": {"generateName": "a-"}}').name == ""
    assert with_body(info, b"k8s\x00\x0a\x0f").name == ""  # protobuf, cut short


def _delimited(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def test_a_go_clients_protobuf_create_is_named_too() -> None:
    """client-go sends built-in kinds as protobuf: ``k8s``, a zero byte, a runtime.Unknown
    (typeMeta 1, raw 2, contentEncoding 3, contentType 4), the object's ObjectMeta its field
    1 (name 1, generateName 2, namespace 3); an integer field before them is skipped."""
    info = parse_request("POST", "/apis/apps/v1/namespaces/ns/statefulsets", {})
    assert info is not None
    meta = b"\x08\x96\x01" + _delimited(1, b"x-server") + _delimited(3, b"ns")
    raw = _delimited(1, meta) + _delimited(2, b"\x08\x01")
    body = (b"k8s\x00" + _delimited(1, _delimited(1, b"apps/v1") + _delimited(2, b"StatefulSet"))
            + _delimited(2, raw) + _delimited(4, b"application/vnd.kubernetes.protobuf"))
    assert with_body(info, body).name == "x-server"
    generated = b"k8s\x00" + _delimited(2, _delimited(1, _delimited(2, b"web-")))
    named = with_body(info, generated)
    assert (named.name, named.generate_name) == ("", "web-")
    # its answer's resourceVersion (ObjectMeta field 6) is the write's receipt
    answered = b"k8s\x00" + _delimited(2, _delimited(1, meta + _delimited(6, b"4711")))
    assert (answered_version(answered), answered_version(body)) == ("4711", None)
    # JSON as Go writes it, and as Python's json writes it (the official client: an update's
    # body, whose version says whether the write stored anything)
    assert answered_version(b'{"metadata":{"resourceVersion":"12"}}') == "12"
    assert answered_version(b'{"metadata": {"name": "x", "resourceVersion": "13"}}') == "13"
    # a delete's answer names the object it deleted by its uid (ObjectMeta field 5)
    deleted = b"k8s\x00" + _delimited(2, _delimited(1, meta + _delimited(5, b"u-1")))
    assert (answered_uid(deleted), answered_uid(body)) == ("u-1", None)
    assert answered_uid(b'{"kind":"PersistentVolumeClaim","metadata":{"name":"d","uid":"u-2",'
                        b'"ownerReferences":[{"uid":"owner"}]}}') == "u-2"


UPDATE_STATUS = RequestInfo("update", "ray.io", "v1", "rayservices", "status", "ns", "r")
GET = RequestInfo("get", "ray.io", "v1", "rayservices", "", "ns", "r")
WATCH = RequestInfo("watch", "", "v1", "pods", "", "ns", "")


def test_request_faults_select_writes_unless_a_verb_is_given() -> None:
    rule = Fault("conflict", resource="rayservices")
    assert rule.selects(UPDATE_STATUS, "op")
    assert not rule.selects(GET, "op")
    assert Fault("error", code=500, verb="get").selects(GET, "op")
    assert not Fault("conflict", subresource="").selects(UPDATE_STATUS, "op")
    assert not Fault("conflict", operator="other").selects(UPDATE_STATUS, "op")
    assert Fault("stale", seconds=1).selects(WATCH, "op")
    assert not Fault("stale", seconds=1).selects(UPDATE_STATUS, "op")


def test_nth_fires_once_and_times_counts_from_there() -> None:
    second = Fault("conflict", nth=2)
    assert [second.count_and_decide() for _ in range(4)] == [False, True, False, False]
    assert (second.matched, second.injected) == (4, 1)
    twice = Fault("conflict", nth=2, times=2)
    assert [twice.count_and_decide() for _ in range(4)] == [False, True, True, False]
    always = Fault("conflict")
    assert all(always.count_and_decide() for _ in range(5))


def test_probability_with_a_seed_repeats_and_another_seed_differs() -> None:
    def draws(seed: int) -> list[bool]:
        rule = Fault("error", code=500, probability=0.5, seed=seed)
        return [rule.count_and_decide() for _ in range(40)]

    assert draws(7) == draws(7)
    assert 5 < sum(draws(7)) < 35
    assert draws(7) != draws(8)
    unseeded = Fault("error", code=500, probability=0.5)
    assert unseeded.seed is not None and f"seed={unseeded.seed}" in str(unseeded)


def test_every_rule_that_selects_a_request_counts_it_the_first_that_fires_answers() -> None:
    plan = FaultPlan()
    first = plan.add(Fault("conflict", nth=1))
    second = plan.add(Fault("error", code=503, nth=2))
    assert plan.request_fault(UPDATE_STATUS, "op") is first
    assert plan.request_fault(UPDATE_STATUS, "op") is second
    assert plan.request_fault(UPDATE_STATUS, "op") is None
    assert (first.matched, second.matched) == (3, 3)
    assert plan.idle() == []


def test_a_crash_follows_successful_writes_only() -> None:
    plan = FaultPlan()
    crash = plan.add(Fault("crash-after-write", nth=2))
    assert plan.crash_after(UPDATE_STATUS, "op", 409) is None
    assert plan.crash_after(GET, "op", 200) is None
    assert plan.crash_after(UPDATE_STATUS, "op", 200) is None
    assert plan.crash_after(UPDATE_STATUS, "op", 201) is crash
    assert plan.crash_after(UPDATE_STATUS, "op", 200) is None


def test_a_write_answered_after_the_test_returned_still_counts_as_sent_before() -> None:
    """The apiserver commits a write before the proxy reads its answer, so a test can see the
    object and return first: the write is still one the test's operators sent before it
    returned (exploration's points), and one sent after the end is not."""
    plan = FaultPlan()
    first = plan.sending()
    plan.crash_after(UPDATE_STATUS, "op", 200, first)
    late = plan.sending()  # sent, answer not read yet when the test returns
    answered = threading.Timer(0.3, plan.crash_after, (UPDATE_STATUS, "op", 201, late))
    answered.start()
    started = time.monotonic()
    end = plan.sent_until_now(timeout=5)
    assert 0.2 < time.monotonic() - started < 4  # it waited for that answer, not the timeout
    after = plan.sending()  # after the end: not the test's
    plan.crash_after(UPDATE_STATUS, "op", 200, after)
    assert [(e.seq, e.code) for e in plan.exchanges_until(end)] == [(first, 200), (late, 201)]
    # an answer that never comes (the apiserver went away) is given up, not waited for
    lost = plan.sending()
    plan.abandon(lost)
    started = time.monotonic()
    plan.sent_until_now(timeout=5)
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("spec", [
    "crash-after-write=3", "conflict:verb=update,resource=rayservices,subresource=status,nth=1",
    "error=503:resource=pods|services,times=2", "throttle=2", "stale=1.5:resource=pods",
    "drop-watches=0", "gone:resource=pods", "timeout=2:verb=create",
    "error=500:probability=0.25,seed=3",
])
def test_the_text_form_reads_back_as_it_is_written(spec: str) -> None:
    assert str(parse_fault(spec)) == spec


def test_the_text_form_sets_what_it_names() -> None:
    rule = parse_fault("throttle=2:resource=pods,nth=3")
    assert (rule.kind, rule.seconds, rule.resource, rule.nth) == ("throttle", 2.0, ("pods",), 3)
    assert parse_fault("crash_after_write=3").nth == 3
    assert parse_fault("throttle:retry-after=4").seconds == 4.0


@pytest.mark.parametrize(("spec", "says"), [
    ("crash-after-writes=3", "unknown fault 'crash-after-writes'; the faults are: "
     + ", ".join(KINDS)),
    ("conflict:verbs=update", "unknown field 'verbs=update'; the fields are: verb, resource"),
    ("gone=3", "fault gone takes no value"),
    ("error=418", "code must be one of 500, 502, 503, 504"),
    ("conflict:verb=put", "unknown verb 'put'"),
    ("conflict:nth=0", "nth counts from 1"),
    ("error:probability=2", "probability must be in (0, 1]"),
    ("stale=soon", "seconds takes a number of seconds, not 'soon' (e.g. stale=2.5)"),
    ("crash-after-write=abc", "nth takes a whole number, not 'abc' (e.g. crash-after-write=3)"),
    ("error:nth=x", "nth takes a whole number, not 'x' (e.g. error:nth=3)"),
    ("error:probability=high", "probability takes a number over 0, at most 1, not 'high'"),
])
def test_bad_specs_say_what_is_valid(spec: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_fault(spec)
    assert says in str(raised.value)


def test_json_watch_streams_are_cut_into_lines_and_bookmarks_do_not_count() -> None:
    framer = Framer("application/json")
    assert framer.feed(b'{"a":1}\n{"b":2}\n') == [b'{"a":1}\n', b'{"b":2}\n']
    assert framer.feed(b'{"type":"ADDED"}\n{"type":"BOOK') == [b'{"type":"ADDED"}\n']
    frames = framer.feed(b'MARK"}\n')
    assert frames == [b'{"type":"BOOKMARK"}\n']
    assert not framer.counts(frames[0])
    assert framer.feed(b'{"type":"DELETED"') == [] and framer.rest() == b'{"type":"DELETED"'


def test_protobuf_watch_streams_are_cut_into_length_prefixed_frames() -> None:
    framer = Framer("application/vnd.kubernetes.protobuf;stream=watch")
    one, two = b"\x00\x00\x00\x03abc", b"\x00\x00\x00\x02de"
    assert framer.feed(one + two[:3]) == [one]
    assert framer.feed(two[3:]) == [two]
    assert Framer("application/cbor-seq").feed(b"xyz") == [b"xyz"]


def _cluster(version: str, deleting: bool = False) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "c", "namespace": "ns", "uid": "u1",
                                   "resourceVersion": version}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"kind": "Cluster", "apiVersion": "x/v1", "metadata": metadata}


def test_a_stale_views_hold_counts_from_the_restarted_instances_first_read() -> None:
    """A restarted operator may wait seconds (its leader election) before it reads: the
    old view is held until it has read it, then ``seconds`` more, then it catches up."""
    plan = FaultPlan()
    rule = plan.add(parse_fault("stale-view=0.2:resource=clusters,name=c,"
                                "change=metadata.deletionTimestamp,nth=1"))
    views = plan.views
    assert views is not None
    views.note("clusters", _cluster("1"))
    views.note("clusters", _cluster("2", deleting=True))  # the anchor
    views.note("clusters", None, key=views.changes[0].key)  # its next change: armed
    key = views.changes[0].key
    plan.start_stale_view(rule)
    try:
        time.sleep(0.5)  # longer than the hold: nobody read it yet, so it is still held
        served, view = views.got("clusters", key, None)
        assert served and view is not None and view["metadata"]["resourceVersion"] == "2"
        deadline = time.monotonic() + 5
        while views.mask(key) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert views.mask(key) is None  # caught up once the hold after the read was over
        notes = [entry.fault for entry in plan.journal.entries]
        assert any("read the old view" in note for note in notes), notes
        assert any("caught up 0.2 s after it first read it" in note for note in notes), notes
    finally:
        plan.close()
