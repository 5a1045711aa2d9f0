"""Stale and unobserved points on known sequences of changes and requests: which objects a
delete relates to, what is made of a delete undone by another controller, and names that
hold from run to run.

The sequences are what a clean run's ledger and plan record (``Change``, ``Exchange``),
written out by hand, so each rule is checked against a known answer.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from envtest.api.explore.inventory import nothing_message
from envtest.api.explore.viewpoints import STALE_LIMIT, stale_points, view_points
from envtest.api.faults.changes import Change, ObjectKey, change_parts
from envtest.api.faults.plan import Exchange
from envtest.api.faults.requestinfo import RequestInfo

NOW = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)


class Ledger:
    """Changes as a ViewLedger numbers them: by object, each part counted apart."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self._latest: dict[ObjectKey, dict[str, Any] | None] = {}
        self._counts: Counter[tuple[ObjectKey, str]] = Counter()

    def serve(self, seq: int, resource: str, name: str, body: dict[str, Any] | None,
              api_version: str = "v1") -> None:
        key = ObjectKey(resource, "ns", name)
        if body is not None:
            body = {"apiVersion": api_version, **body,
                    "metadata": {"name": name, "namespace": "ns", **body.get("metadata", {})}}
        old = self._latest.get(key)
        parts = ["seen"] if key not in self._latest else change_parts(old, body)
        what = "+".join(parts)
        self._counts[(key, what)] += 1
        for part in parts:
            self._counts[(key, f"part:{part}")] += 1
        self.changes.append(Change(key, what, self._counts[(key, what)], body, old, seq,
                                   tuple(parts), {p: self._counts[(key, f"part:{p}")]
                                                  for p in parts}))
        self._latest[key] = body


def request(verb: str, resource: str, name: str, seq: int, version: str = "") -> Exchange:
    return Exchange(NOW, "op", RequestInfo(verb, "", "v1", resource, namespace="ns",
                                           name=name), 200, seq, version)


def meta(uid: str, version: str, **more: Any) -> dict[str, Any]:
    return {"uid": uid, "resourceVersion": version, **more}


def test_a_claim_another_controller_makes_again_gives_stale_points_from_its_relations() -> None:
    """ZooKeeper's operator deletes its cluster's claims when the cluster goes; the
    StatefulSet controller makes them again for the new cluster.  No create of the
    operator's: the claim of another uid, served to it, is the making again."""
    ledger = Ledger()
    cluster = {"metadata": meta("c1", "10"), "spec": {"replicas": 1}}
    ledger.serve(1, "zookeeperclusters", "zk", cluster, "zookeeper.pravega.io/v1beta1")
    ledger.serve(2, "statefulsets", "zk", {"metadata": meta("s1", "11", ownerReferences=[
        {"uid": "c1", "kind": "ZookeeperCluster", "name": "zk"}]), "spec": {
        "selector": {"matchLabels": {"app": "zk"}}}}, "apps/v1")
    ledger.serve(3, "persistentvolumeclaims", "data-zk-0", {"metadata": meta(
        "p1", "12", labels={"app": "zk"})})
    ledger.serve(4, "zookeeperclusters", "zk", {**cluster, "metadata": meta(
        "c1", "13", deletionTimestamp="2026-12-06T00:00:00Z")},
        "zookeeper.pravega.io/v1beta1")
    # seq 5: the operator deletes the claim; then the cluster goes and comes back
    ledger.serve(6, "zookeeperclusters", "zk", None)
    ledger.serve(7, "zookeeperclusters", "zk", {**cluster, "metadata": meta("c2", "20")},
                 "zookeeper.pravega.io/v1beta1")
    ledger.serve(8, "statefulsets", "zk", {"metadata": meta("s2", "21", ownerReferences=[
        {"uid": "c2", "kind": "ZookeeperCluster", "name": "zk"}]), "spec": {
        "selector": {"matchLabels": {"app": "zk"}}}}, "apps/v1")
    ledger.serve(9, "persistentvolumeclaims", "data-zk-0", {"metadata": meta(
        "p2", "22", labels={"app": "zk"})})
    exchanges = [request("delete", "persistentvolumeclaims", "data-zk-0", 5)]
    points = stale_points(ledger.changes, exchanges)
    # The cluster (a custom resource) first; the claim itself (made again in between);
    # the StatefulSet, whose selector matches the claim's labels.
    assert [p.spec.split(":resource=")[1].split(",")[0] for p in points] == [
        "zookeeperclusters", "persistentvolumeclaims", "statefulsets"], points
    cluster_point = points[0]
    assert cluster_point.spec == (
        "stale-view=3:resource=zookeeperclusters,name=zk,before=delete/persistentvolumeclaims/"
        "data-zk-0,restart=made/persistentvolumeclaims/data-zk-0,nth=1")
    assert cluster_point.label == (
        "stale view: restarted once persistentvolumeclaims data-zk-0 is made again, seeing "
        "zookeeperclusters zk (custom resource) as before the 1st delete of "
        "persistentvolumeclaims data-zk-0, for 3 s")
    assert "(the object itself)" in points[1].label and "(selects it)" in points[2].label


def test_a_delete_never_undone_makes_no_stale_point_and_the_message_says_why() -> None:
    ledger = Ledger()
    ledger.serve(1, "widgets", "w", {"metadata": meta("w1", "1")}, "example.com/v1")
    ledger.serve(3, "widgets", "w", {"metadata": meta("w1", "2", deletionTimestamp="t")},
                 "example.com/v1")
    exchanges = [request("patch", "configmaps", "w-data", 2, "5"),
                 request("delete", "configmaps", "w-data", 4)]
    assert stale_points(ledger.changes, exchanges) == []
    message = nothing_message(("stale",), exchanges, ledger.changes)
    assert "2 successful write(s) (1 delete, 1 patch)" in message, message
    assert "stale: 1 delete(s) (configmaps w-data), none of an object that was made again" \
        in message, message


def test_a_view_the_same_at_the_restart_is_no_point() -> None:
    """A related object that did not change between the delete and the making again: the
    view sent back to before the delete would be the one it has: no point."""
    ledger = Ledger()
    ledger.serve(1, "widgets", "w", {"metadata": meta("w1", "1")}, "example.com/v1")
    ledger.serve(3, "configmaps", "w-data", {"metadata": meta("d2", "4")})
    exchanges = [request("delete", "configmaps", "w-data", 2),
                 request("create", "configmaps", "w-data", 3, "4")]
    specs = [p.spec for p in stale_points(ledger.changes, exchanges)]
    assert not any("resource=widgets" in s for s in specs), specs


def test_a_stale_points_name_holds_whatever_came_between() -> None:
    """A heartbeat of the operator's framework may land between the deletionTimestamp and
    the deletion in one run and not in another: the point is named by the delete it
    precedes, so it is the same point in both."""
    def run(heartbeat: bool) -> list[str]:
        ledger = Ledger()
        ledger.serve(1, "buckets", "photos", {"metadata": meta("b1", "1")},
                     "storage.example.com/v1")
        ledger.serve(2, "buckets", "photos", {"metadata": meta(
            "b1", "2", deletionTimestamp="t")}, "storage.example.com/v1")
        if heartbeat:
            ledger.serve(3, "buckets", "photos", {"metadata": meta(
                "b1", "3", deletionTimestamp="t"), "status": {"beat": 1}},
                "storage.example.com/v1")
        ledger.serve(5, "buckets", "photos", None)
        ledger.serve(6, "buckets", "photos", {"metadata": meta("b2", "9")},
                     "storage.example.com/v1")
        exchanges = [request("delete", "configmaps", "photos-data", 4),
                     request("create", "configmaps", "photos-data", 7, "10")]
        return [f"{p.spec} | {p.label}" for p in stale_points(ledger.changes, exchanges)]

    assert run(heartbeat=True) == run(heartbeat=False) != []


def test_stale_points_are_capped_closest_relations_first() -> None:
    ledger = Ledger()
    for index in range(STALE_LIMIT + 4):  # as many custom resources, each changed
        ledger.serve(1, "widgets", f"w{index}", {"metadata": meta(f"u{index}", "1")},
                     "example.com/v1")
        ledger.serve(3, "widgets", f"w{index}", {"metadata": meta(f"u{index}", "2")},
                     "example.com/v1")
    exchanges = [request("delete", "configmaps", "data", 2),
                 request("create", "configmaps", "data", 4, "7")]
    merged: Counter[str] = Counter()
    points = stale_points(ledger.changes, exchanges, merged)
    assert len(points) == STALE_LIMIT and merged["beyond the limit"] == 4


def test_an_unobserved_point_is_named_by_one_field_whatever_came_with_it() -> None:
    """Which status write first sets a field varies from run to run; the point names the
    field, and counts that field's changes."""
    def run(together: bool) -> list[str]:
        ledger = Ledger()
        ledger.serve(1, "configmaps", "db", {"metadata": meta("d", "1"),
                                             "data": {"version": "v1"}})
        if together:
            ledger.serve(2, "configmaps", "db", {"metadata": meta("d", "2", labels={"x": "y"}),
                                                 "data": {"version": "v2"}})
        else:
            ledger.serve(2, "configmaps", "db", {"metadata": meta("d", "2"),
                                                 "data": {"version": "v2"}})
        ledger.serve(3, "configmaps", "db", {"metadata": meta("d", "3", labels={"x": "y"}),
                                             "data": {"version": "v3"}})
        return [p.spec for p in view_points(("unobserved",), ledger.changes, [], Counter())
                if "change=data.version" in p.spec]

    assert run(together=True) == run(together=False) == [
        "unobserved:resource=configmaps,name=db,change=data.version,until=data.version,nth=1"]
