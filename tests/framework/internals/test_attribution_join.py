"""The join of writes to changes on known sequences (no cluster: the rules themselves)."""

from __future__ import annotations

import datetime as dt

from envtest.api.observe.attribution import attribute
from envtest.api.observe.recorder import Change, FieldChange
from envtest.controlplane import ApiCall

T0 = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)
KEY = ("example.com", "widgets", "ns", "w")


def _at(ms: float) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def _call(audit_id: str, verb: str, start: float, end: float, subresource: str = "",
          user: str = "op", agent: str = "op/1", rv: str = "") -> ApiCall:
    return ApiCall(audit_id, user, (), verb, "widgets", subresource, "example.com", "ns", "w",
                   200, "/apis/example.com/v1/namespaces/ns/widgets/w", agent, _at(start),
                   _at(end), int(start * 1000), rv)


def _change(version: int, seen: float, *paths: str, kind: str = "MODIFIED",
            managers: tuple[tuple[str, str, str], ...] = ()) -> Change:
    return Change(_at(seen), kind, KEY, str(version), str(version - 1),
                  tuple(FieldChange(p, None, 1) for p in paths), managers)


def has_status(group: str, plural: str) -> bool:
    return True


def test_a_change_seen_before_the_next_write_began_is_the_first_writes() -> None:
    first, second = _call("a", "patch", 0, 2, "status"), _call("b", "patch", 5, 7, "status")
    joined = attribute([first, second], [_change(2, 3, "status.ready")], has_status)
    assert [(j.call.audit_id, j.change is not None, j.exact) for j in joined] == [
        ("a", True, True), ("b", False, True)]


def test_a_change_seen_after_both_is_one_of_them_counted_not_named() -> None:
    first, second = _call("a", "patch", 0, 2, "status"), _call("b", "patch", 5, 7, "status")
    joined = attribute([first, second], [_change(2, 9, "status.ready")], has_status)
    assert [j.exact for j in joined] == [False, False]
    assert {j.group for j in joined} == {frozenset({"a", "b"})}
    assert {j.group_changes for j in joined} == {1}  # one change between two writes


def test_order_decides_between_two_writers_of_the_same_kind() -> None:
    """Two annotation patches in a row, two changes: the first change is the first patch's,
    though both were seen after both patches were sent (one writer commits in order)."""
    writes = [_call("a", "patch", 0, 2), _call("b", "patch", 5, 7)]
    joined = attribute(writes, [_change(2, 9, "metadata.annotations.x"),
                                _change(3, 10, "metadata.annotations.x")], has_status)
    assert [(j.call.audit_id, j.change.resource_version, j.exact) for j in joined
            if j.change] == [("a", "2", True), ("b", "3", True)]


def test_the_subresource_and_the_field_manager_rule_writes_out() -> None:
    status = _call("s", "patch", 0, 2, "status")
    alice = _call("u", "update", 3, 4, agent="alice/1", rv="2", user="alice")
    admin = _call("p", "patch", 5, 6, agent="admin/1", user="admin")
    changes = [_change(3, 9, "data.a", managers=(("admin", "Update", ""),))]
    joined = {j.call.audit_id: j for j in attribute([status, alice, admin], changes,
                                                    has_status)}
    assert joined["p"].change is changes[0] and joined["p"].exact
    assert joined["u"].change is None and joined["u"].exact  # stored nothing, for sure
    assert joined["s"].change is None and joined["s"].exact  # a status write: not data.a
