"""Exploration's arithmetic on known sequences: the points a clean run's traffic makes, the
seeded sample, and the end-state comparison (what is noise and what is a difference)."""

from __future__ import annotations

import datetime as dt

import pytest

from envtest.api.explore import (
    EndState,
    compare_end_states,
    fault_points,
    parse_explore_kinds,
    sample,
)
from envtest.api.explore.oracles.endstate import normalize
from envtest.api.faults import parse_fault
from envtest.api.faults.plan import Exchange
from envtest.api.faults.requestinfo import RequestInfo
from envtest.errors import ConfigurationError

NOW = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def exchange(verb: str, resource: str, name: str, code: int = 200,
             subresource: str = "", version: str = "", noop: bool = False,
             operator: str = "op") -> Exchange:
    return Exchange(NOW, operator,
                    RequestInfo(verb, "", "v1", resource, subresource, "ns-1", name), code,
                    version=version, noop=noop)


TRAFFIC = [
    exchange("watch", "configmaps", "", 0),
    exchange("create", "configmaps", "child", 201),
    exchange("update", "widgets", "w", 409, "status"),  # a real conflict: not a crash point
    exchange("update", "widgets", "w", 200, "status"),
    exchange("patch", "configmaps", "parent"),
    exchange("watch", "pods", "", 0),
    exchange("watch", "configmaps", "", 0),  # watched again: one point for the resource
]


def test_each_point_is_named_by_the_request_it_faults() -> None:
    points = fault_points(("crashes", "conflicts", "errors", "lag"), TRAFFIC)
    assert [(p.kind, p.spec, p.label) for p in points] == [
        ("crashes", "crash-after-write=1:verb=create,resource=configmaps,subresource=,"
                    "name=child", "crash after the 1st create of configmaps child"),
        ("crashes", "crash-after-write=1:verb=update,resource=widgets,subresource=status,"
                    "name=w", "crash after the 1st update of widgets/status w"),
        ("crashes", "crash-after-write=1:verb=patch,resource=configmaps,subresource=,"
                    "name=parent", "crash after the 1st patch of configmaps parent"),
        ("conflicts", "conflict:verb=update,resource=widgets,subresource=status,name=w,nth=1",
         "409 Conflict on the 1st update of widgets/status w"),
        ("conflicts", "conflict:verb=update,resource=widgets,subresource=status,name=w,nth=2",
         "409 Conflict on the 2nd update of widgets/status w"),
        ("errors", "error=500:verb=create,resource=configmaps,subresource=,name=child,nth=1",
         "500 on the 1st create of configmaps child"),
        ("errors", "error=500:verb=update,resource=widgets,subresource=status,name=w,nth=1",
         "500 on the 1st update of widgets/status w"),
        ("errors", "error=500:verb=update,resource=widgets,subresource=status,name=w,nth=2",
         "500 on the 2nd update of widgets/status w"),
        ("errors", "error=500:verb=patch,resource=configmaps,subresource=,name=parent,nth=1",
         "500 on the 1st patch of configmaps parent"),
        ("lag", "stale=3:resource=configmaps", "watch events of configmaps held back 3 s"),
        ("lag", "gone:resource=configmaps,times=1",
         "first watch of configmaps answered 410 Gone"),
        ("lag", "stale=3:resource=pods", "watch events of pods held back 3 s"),
        ("lag", "gone:resource=pods,times=1", "first watch of pods answered 410 Gone"),
    ]
    for point in points:  # each spec is a rule --envtest-fault reads back as itself
        assert str(parse_fault(point.spec)) == point.spec


def test_a_point_meets_its_request_whatever_else_came_before_it() -> None:
    """The rule of "the 1st delete of statefulsets x-server" selects that request only: a run
    that writes a heartbeat ConfigMap a varying number of times first still meets it."""
    [point] = [p for p in fault_points(("crashes",), [
        exchange("update", "configmaps", "heartbeat"),
        exchange("delete", "statefulsets", "x-server")]) if "statefulsets" in p.spec]
    rule = parse_fault(point.spec)
    heartbeat = RequestInfo("update", "", "v1", "configmaps", "", "ns-2", "heartbeat")
    delete = RequestInfo("delete", "apps", "v1", "statefulsets", "", "ns-2", "x-server")
    assert not rule.selects(heartbeat, "op") and rule.selects(delete, "op")
    for _ in range(7):  # seven heartbeats this run: none counts
        assert not (rule.selects(heartbeat, "op") and rule.count_and_decide())
    assert rule.selects(delete, "op") and rule.count_and_decide() and rule.injected == 1


def test_generated_names_and_events_are_named_as_two_runs_agree() -> None:
    made = Exchange(NOW, "op", RequestInfo("create", "", "v1", "configmaps", "", "ns-1", "",
                                           generate_name="order-1-receipt-"), 201)
    event = exchange("create", "events", "order-1.17a2b3c4d5e6f708", 201)
    labels = [p.label for p in fault_points(("crashes",), [made, event])]
    assert labels == ["crash after the 1st create of configmaps order-1-receipt-*",
                      "crash after the 1st create of events order-1.*"]
    rule = parse_fault(fault_points(("crashes",), [made])[0].spec)
    other_run = RequestInfo("create", "", "v1", "configmaps", "", "ns-9", "",
                            generate_name="order-1-receipt-")
    assert rule.selects(other_run, "op")
    named = RequestInfo("update", "", "v1", "configmaps", "", "ns-9", "order-1-receipt-x7k2p")
    assert parse_fault("crash-after-write=1:verb=update,name=order-1-receipt-*").selects(
        named, "op")


def test_equivalent_points_are_merged_and_counted() -> None:
    """A crash after a write that stored nothing is a crash before it; an identity repeated
    on every reconcile keeps its first two occurrences and its last."""
    traffic = [exchange("update", "widgets", "w", 200, "status", version=str(v))
               for v in range(1, 7)]
    traffic.append(exchange("patch", "configmaps", "c", version="9", noop=True))
    points = fault_points(("crashes",), traffic)
    assert [p.label for p in points] == [
        "crash after the 1st update of widgets/status w",
        "crash after the 2nd update of widgets/status w",
        "crash after the 6th update of widgets/status w"]
    assert points.merged == {"repeat": 3, "no-op": 1}


def test_several_operators_are_named_in_their_points() -> None:
    traffic = [exchange("create", "configmaps", "a", 201, operator="one"),
               exchange("create", "configmaps", "a", 201, operator="two")]
    specs = [p.spec for p in fault_points(("crashes",), traffic)]
    assert specs == [
        "crash-after-write=1:verb=create,resource=configmaps,subresource=,name=a,operator=one",
        "crash-after-write=1:verb=create,resource=configmaps,subresource=,name=a,operator=two"]


def test_only_the_kinds_asked_for() -> None:
    assert {p.kind for p in fault_points(("conflicts",), TRAFFIC)} == {"conflicts"}
    assert list(fault_points(("crashes",), [exchange("watch", "pods", "", 0)])) == []


def test_kinds_parse_in_a_stable_order_and_unknown_ones_list_the_valid() -> None:
    assert parse_explore_kinds("lag, crashes") == ("crashes", "lag")
    assert parse_explore_kinds("views") == ("stale", "unobserved")
    assert parse_explore_kinds("all") == ("crashes", "conflicts", "errors", "stale",
                                          "unobserved", "lag")  # every fault kind
    assert parse_explore_kinds("operations,all")[-1] == "operations"  # asked by name
    assert parse_explore_kinds("") == ()
    with pytest.raises(ConfigurationError, match="unknown exploration 'crash'; choose from "
                       "crashes, conflicts, errors, stale, unobserved, lag"):
        parse_explore_kinds("crash")


def test_a_sample_is_bounded_repeatable_by_its_seed_and_keeps_the_order() -> None:
    points = list(fault_points(("errors",), [exchange("create", "pods", f"p{i}", 201)
                                             for i in range(120)]))
    first = sample(points, 50, seed=7)
    assert len(first) == 50 and first == sample(points, 50, seed=7)
    assert first != sample(points, 50, seed=8)
    assert first == sorted(first, key=points.index)
    assert sample(points, 0, seed=7) == points  # no limit
    assert sample(points[:3], 50, seed=7) == points[:3]


def config_map(name: str, namespace: str, **extra: object) -> dict[str, object]:
    metadata = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}",
                "resourceVersion": "17", "creationTimestamp": "2026-12-02T00:00:00Z",
                "managedFields": [{"manager": "x"}],
                "ownerReferences": [{"kind": "Widget", "name": "w", "uid": "u-1"}]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, **extra}


def state(*items: tuple[str, dict[str, object]]) -> EndState:
    result = EndState()
    for key, item in items:
        result.objects.setdefault(key, []).append(item)
    return result


def test_what_differs_between_any_two_runs_is_not_a_difference() -> None:
    clean = normalize(config_map("a", "ns-1", data={"at": "2026-12-02T00:00:01.5Z",
                                                    "where": "svc.ns-1.svc"}), ["ns-1"])
    faulted = normalize(config_map("a", "ns-2", data={"at": "2026-12-02T09:09:09+01:00",
                                                      "where": "svc.ns-2.svc"}), ["ns-2"])
    assert clean == faulted
    assert clean["metadata"] == {"name": "a",
                                 "ownerReferences": [{"kind": "Widget", "name": "w"}]}


def test_differences_are_missing_extra_counted_and_changed_fields() -> None:
    base = normalize(config_map("a", "ns", data={"k": "1"}), ["ns"])
    changed = normalize(config_map("a", "ns", data={"k": "2"}), ["ns"])
    clean = state(("configmaps a", base), ("configmaps gone", base),
                  ("configmaps r-*", base))
    faulted = state(("configmaps a", changed), ("configmaps r-*", base),
                    ("configmaps r-*", base), ("configmaps orphan", base))
    assert compare_end_states(clean, faulted) == [
        "changed: configmaps a: data.k: '1' -> '2'",
        "missing: configmaps gone",
        "extra: configmaps orphan",
        "count: configmaps r-*: 1 in the clean run, 2 here",
    ]
    assert compare_end_states(clean, clean) == []


def test_noise_paths_match_keys_with_dots_and_stars() -> None:
    item = config_map("a", "ns", status={"phase": "x", "seen": "y"})
    item["metadata"]["annotations"] = {  # type: ignore[index]
        "kopf.zalando.org/last-handled-configuration": "{...}", "keep": "me"}
    document = normalize(item, ["ns"], noise=(
        "metadata.annotations.kopf.zalando.org/last-handled-configuration", "status.*"))
    assert document["metadata"]["annotations"] == {"keep": "me"}
    assert document["status"] == {}


def test_a_test_namespace_is_a_placeholder_in_names_and_identities_alike() -> None:
    """An operator's record ``<namespace of the Cache>.<name>``, in a namespace of its own:
    each run's test namespace is another name, and was read as another object (77 false
    bugs on a new user's operator: "extra: configmaps test-...-a0cf8.demo")."""
    from envtest.api.explore.oracles.endstate import end_state, object_key
    from envtest.api.faults.identity import name_matches
    from envtest.api.objects.provenance.names import canonical, register_run_namespace

    register_run_namespace("test-cache-a0cf8", 0)
    register_run_namespace("test-cache-c5d22", 0)
    register_run_namespace("test-cache-c5d22-records", 1)
    assert canonical("test-cache-a0cf8.demo") == canonical("test-cache-c5d22.demo") == \
        "<namespace-0>.demo"
    assert canonical("test-cache-c5d22-records") == "<namespace-1>"  # the longest first
    assert canonical("backup-29431234") == "backup-<time>"  # a CronJob's minute
    assert canonical("owner-0d4674eb-3f2d-4520-b1f3-b5573ec15dbc") == "owner-<uid>"
    assert canonical("order-12") == "order-12"  # a count stays
    # A point learnt in one run selects the same object in another.
    assert name_matches(canonical("test-cache-a0cf8.demo"), "configmaps",
                        "test-cache-c5d22.demo")
    states = []
    for namespace in ("test-cache-a0cf8", "test-cache-c5d22"):
        record = config_map(f"{namespace}.demo", "records")
        states.append(end_state([(object_key("configmaps", "", record, [namespace]), record)],
                                [namespace]))
    assert list(states[0].objects) == ["configmaps <namespace-0>.demo"]
    assert compare_end_states(*states) == []
