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


# -- receipts: the version each write was answered with ------------------------------------

def _receipts(**answers: str):  # audit id -> version
    return answers.get


def test_two_users_of_one_client_library_told_apart_by_their_receipts() -> None:
    """alice's update answered with the version it carried stored nothing; the admin's
    patch answered with the change's version made it, though both share a field manager
    (and the change, seen after both, says no more)."""
    shared = "OpenAPI-Generator/37.0.2/python"
    alice = _call("u", "update", 0, 2, user="alice", agent=shared, rv="1")
    admin = _call("p", "patch", 5, 7, user="envtest-admin", agent=shared)
    change = [_change(2, 9, "data.a", managers=(("OpenAPI-Generator", "Update", ""),))]
    blind = attribute([alice, admin], change, has_status)
    assert [j.exact for j in blind] == [False, False]  # without receipts: counted, not named
    joined = attribute([alice, admin], change, has_status, receipt=_receipts(u="1", p="2"))
    assert [(j.call.audit_id, j.change is not None, j.exact) for j in joined] == [
        ("u", False, True), ("p", True, True)]
    # One receipt is enough when it settles the other's: the update's says it stored nothing.
    half = attribute([alice, admin], change, has_status, receipt=_receipts(u="1"))
    assert [(j.change is not None, j.exact) for j in half] == [(False, True), (True, True)]


def test_an_update_answered_with_a_new_version_must_have_made_a_change() -> None:
    """Two updates in a row carrying the same version, one change seen after both: the
    first's receipt says it stored something, so the change is its (the second got the
    object already changed: a 409 in life, here it names which made it)."""
    first = _call("a", "update", 0, 2, rv="1")
    second = _call("b", "patch", 5, 7)
    change = [_change(2, 9, "spec.x")]
    joined = attribute([first, second], change, has_status, receipt=_receipts(a="2"))
    assert [(j.call.audit_id, j.change is not None, j.exact) for j in joined] == [
        ("a", True, True), ("b", False, True)]


def test_a_write_answered_with_an_earlier_writes_version_made_nothing() -> None:
    """Two patches one after the other, both answered with version 2: the second found the
    object already changed by the first, whichever user sent which."""
    writes = [_call("a", "patch", 0, 2, user="alice"), _call("b", "patch", 5, 7, user="bob")]
    joined = attribute(writes, [_change(2, 9, "metadata.labels.x")], has_status,
                       receipt=_receipts(a="2", b="2"))
    assert [(j.call.audit_id, j.change is not None, j.exact) for j in joined] == [
        ("a", True, True), ("b", False, True)]


def test_overlapping_writes_with_one_answer_stay_counted_not_named() -> None:
    """At the same time and answered alike: one made the change, the other found it made;
    which, nothing says (kopf's reaction overlapping the test's own patch)."""
    writes = [_call("a", "patch", 0, 4, user="kopf"), _call("b", "patch", 1, 5, user="admin")]
    joined = attribute(writes, [_change(2, 9, "metadata.annotations.x")], has_status,
                       receipt=_receipts(a="2", b="2"))
    assert [j.exact for j in joined] == [False, False]
    assert {j.group for j in joined} == {frozenset({"a", "b"})}


def test_an_update_that_carried_a_version_did_not_create_the_object() -> None:
    """A create, then an update carrying the created version, the ADDED change seen after
    both (the recorder lagging): the creation is the create's, surely."""
    create, update = _call("c", "create", 0, 2), _call("u", "update", 3, 4, rv="2")
    joined = attribute([create, update], [_change(2, 9, "spec.x", kind="ADDED")], has_status)
    assert [(j.call.audit_id, j.change is not None, j.exact) for j in joined] == [
        ("c", True, True), ("u", False, True)]
