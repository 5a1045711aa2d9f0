"""Operation exploration's search, shrinking, point rules and oracles, on known trial outcomes.

The trials here are functions of the sequence (what a trial on a plane returns for it is
decided by the sequence alone), so what the search does with them can be checked exactly:
it shrinks to the shortest failing sequence, keeps its budget, stops after a crash, and
skips a refused sequence.  The plane-side of a trial is tested in
tests/framework/test_planted_operations.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from envtest import ConfigurationError
from envtest.api.explore.operations.consistency import consistency, spots
from envtest.api.explore.operations.outcome import TrialResult, _without_counters
from envtest.api.explore.operations.placement import Place, family, rename_noise
from envtest.api.explore.operations.search import (
    UNSERVED,
    changes_from_json,
    replay,
    search,
)
from envtest.api.explore.oracles.differences import compare_end_states
from envtest.api.explore.oracles.endstate import EndState
from envtest.api.explore.points import parse_point
from envtest.api.operations.changes import Change, Edit

CRD = yaml.safe_load("""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tanks.planted.example.com}
spec:
  group: planted.example.com
  names: {kind: Tank, plural: tanks}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: integer, minimum: 0, maximum: 4}
                image: {type: string, default: "registry.local/tank:1.4"}
                mode: {type: string, enum: [fast, safe]}
""")
START = {"size": 2, "image": "registry.local/tank:1.4"}


def _final(changes: list[Change]) -> dict[str, Any]:
    spec: dict[str, Any] = dict(START)
    for change in changes:
        spec = change.apply(spec)
    return spec


def trial_failing_when(condition: Any, calls: list[list[Change]] | None = None) -> Any:
    def run(changes: list[Change]) -> TrialResult:
        if calls is not None:
            calls.append(changes)
        result = TrialResult(list(changes))
        if condition(changes):
            result.findings.append("differential: planted")
        return result
    return run


def test_a_failing_sequence_is_shrunk_to_its_one_failing_edit() -> None:
    found = search(trial_failing_when(lambda c: _final(c).get("mode") == "safe"), CRD, START,
                   examples=50, most_trials=200, most_edges=0)
    assert found.failing is not None
    assert found.failing.changes == [Change((Edit(("mode",), "safe"),))]
    assert found.sequence == "# change 1: spec.mode: safe\nspec:\n  mode: safe"
    assert found.first_failure_after is not None and found.trials <= 200


def test_the_search_keeps_its_budget_of_trials() -> None:
    calls: list[list[Change]] = []
    found = search(trial_failing_when(lambda c: False, calls), CRD, START, examples=50,
                   most_trials=7)
    assert found.failing is None and found.trials == 7 == len(calls)


def test_a_crash_ends_the_search_where_it_was() -> None:
    calls: list[list[Change]] = []

    def crashing(changes: list[Change]) -> TrialResult:
        calls.append(changes)
        result = TrialResult(list(changes))
        result.findings.append("an operator crashed after change 1: boom")
        return result

    found = search(crashing, CRD, START, examples=20, most_trials=30)
    assert len(calls) == 1 and found.failing is not None and found.trials == 1
    revived: list[int] = []

    def dies_again() -> bool:
        revived.append(len(calls))
        return False

    calls.clear()
    found = search(crashing, CRD, START, examples=20, most_trials=30, revive=dies_again)
    assert len(calls) == 1 and revived == [1] and found.trials == 1


def test_a_crash_is_shrunk_once_the_operator_is_started_again() -> None:
    """Before, the search ended at the first crash: Redis's operator, dead of a
    ``redisSecret`` without its key, was reported with the three changes of the first
    sequence drawn; started again after each crash, the shrink goes on to the one edit."""
    def crashing(changes: list[Change]) -> TrialResult:
        result = TrialResult(list(changes))
        if _final(changes).get("mode") == "safe":
            result.findings.append("an operator crashed after change 1: boom")
        return result

    revived: list[int] = []
    found = search(crashing, CRD, START, examples=50, most_trials=200, most_edges=0,
                   revive=lambda: revived.append(1) is None)
    assert found.failing is not None and len(revived) >= 2
    assert found.failing.changes == [Change((Edit(("mode",), "safe"),))]


def _leaks(changes: list[Change]) -> bool:
    """A shrink below the tank's 2 parts (the planted leaky-shrink keeper's bug)."""
    return int(_final(changes)["size"]) < 2


@pytest.mark.parametrize("draw_seed", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
def test_the_schemas_edges_are_tried_first_and_a_failing_edge_ends_the_search(
        draw_seed: int) -> None:
    calls: list[list[Change]] = []
    found = search(trial_failing_when(lambda c: False, calls), CRD, START, examples=4,
                   most_trials=30, draw_seed=draw_seed)
    # size's lower bound, mode's first value (absent, no default), size's maximum
    assert calls[:3] == [[Change((Edit(("size",), 0),))], [Change((Edit(("mode",), "fast"),))],
                         [Change((Edit(("size",), 4),))]]
    assert found.failing is None and found.trials == len(calls) > 3  # then the drawn ones
    calls.clear()
    found = search(trial_failing_when(_leaks, calls), CRD, START, draw_seed=draw_seed)
    assert calls == [[Change((Edit(("size",), 0),))]] and found.trials == 1
    assert found.failing is not None
    assert found.sequence == "# change 1: spec.size: 0\nspec:\n  size: 0"


def test_a_search_without_edges_finds_an_edge_only_as_its_seed_draws_it() -> None:
    """What the edges are for: eight drawn sequences meet a shrink of the tank on most seeds,
    not all (12 of 300 missed it, and CI once); with the edges a seed that missed it finds
    it in its first trial."""
    missed = next((draw_seed for draw_seed in range(300)
                   if search(trial_failing_when(_leaks), CRD, START, most_edges=0,
                             draw_seed=draw_seed).failing is None), None)
    assert missed is not None, "every seed met the shrink: nothing shows what edges add"
    found = search(trial_failing_when(_leaks), CRD, START, draw_seed=missed)
    assert found.failing is not None and found.trials == 1


def test_a_refused_sequence_is_no_example_and_an_unserved_one_ends_the_search() -> None:
    def refused(changes: list[Change]) -> TrialResult:
        return TrialResult(list(changes), refused="change 1: the schema said no")

    found = search(refused, CRD, START, examples=5, most_trials=10)
    assert found.failing is None and found.refused == found.trials >= 1
    calls: list[list[Change]] = []

    def unserved(changes: list[Change]) -> TrialResult:
        calls.append(changes)
        return TrialResult(list(changes), unserved=True)

    found = search(unserved, CRD, START, examples=5, most_trials=10)
    assert found.unserved == UNSERVED and len(calls) == 1


def test_skipped_fields_are_never_changed() -> None:
    calls: list[list[Change]] = []
    search(trial_failing_when(lambda c: False, calls), CRD, START, examples=30, most_trials=30,
           skip=("spec.image", "spec.mode"))
    assert calls and all(edit.path == ("size",) for changes in calls for change in changes
                         for edit in change.edits)


def test_only_the_fields_named_are_changed() -> None:
    calls: list[list[Change]] = []
    search(trial_failing_when(lambda c: False, calls), CRD, START, examples=30, most_trials=30,
           only=("spec.mode",))
    assert calls and all(edit.path == ("mode",) for changes in calls for change in changes
                         for edit in change.edits)


def test_a_replay_runs_exactly_the_sequence_its_rule_names() -> None:
    changes = changes_from_json('[{"spec":{"size":0}},{"spec":{"image":null,"mode":"safe"}}]')
    assert changes == [Change((Edit(("size",), 0),)),
                       Change((Edit(("image",), removed=True), Edit(("mode",), "safe")))]
    calls: list[list[Change]] = []
    found = replay(trial_failing_when(lambda c: True, calls), changes)
    assert calls == [changes] and found.failing is not None and found.trials == 1


@pytest.mark.parametrize(("text", "message"), [
    ("operations:resource=tanks.x", "write it as operations:resource="),
    ("operations:resource=tanks.x,name=t;changes=[{", "its changes are not JSON"),
    ("operations:resource=tanks.x,name=t;changes={}", "must be a JSON list"),
])
def test_a_bad_operations_point_is_a_usage_error(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_point(text)
    assert parse_point("operations:resource=tanks.x,name=t") == \
        "operations:resource=tanks.x,name=t"


def _state(objects: dict[str, list[Any]]) -> EndState:
    return EndState(objects, {}, [])


def test_a_shared_trial_judges_its_resources_family_under_one_name() -> None:
    state = _state({
        "configmaps t-c3-config": [{"data": {"owner": "t-c3"}}],
        "configmaps t-config": [{"data": {"owner": "t"}}],
        "configmaps t-c30-config": [{"data": {}}],
        "pods web-x": [{"metadata": {"ownerReferences": [{"name": "t-c3-set"}]}}],
    })
    mine = family(state, Place("ns", "t-c3", shared=True))
    assert set(mine.objects) == {"configmaps <resource>-config", "pods web-x"}
    assert mine.objects["configmaps <resource>-config"] == [{"data": {"owner": "<resource>"}}]
    assert family(state, Place("ns", "t")) is state  # a namespace of its own: all of it
    # the test's own object, given to the trial's resource since: still the test's
    taken = _state({"services cluster1-seed": [{"metadata": {"ownerReferences": [
        {"name": "t-c3"}]}}]})
    assert family(taken, Place("ns", "t-c3", shared=True),
                  before={"services cluster1-seed"}).objects == {}
    assert set(family(taken, Place("ns", "t-c3", shared=True)).objects) == \
        {"services cluster1-seed"}
    assert rename_noise({"services t-head": ["spec.clusterIP"]}, "t") == \
        {"services <resource>-head": ["spec.clusterIP"]}


def test_consistency_finds_a_value_kept_where_the_change_should_have_moved_it() -> None:
    before = _state({"configmaps t-config": [{"data": {"image": "registry.local/tank:1.4"}}],
                     "tanks.planted.example.com t": [{"spec": {"image": "x"}}]})
    change = Change((Edit(("image",), "registry.local/tank:2.0"),))
    found, warned = consistency(1, change, START, before, before,
                                "tanks.planted.example.com", wrote=False)
    assert found == ["consistency: change 1 set spec.image to 'registry.local/tank:2.0', but "
                     "configmaps t-config data.image kept 'registry.local/tank:1.4'"]
    moved = _state({"configmaps t-config": [{"data": {"image": "registry.local/tank:2.0"}}]})
    assert consistency(1, change, START, before, moved, "tanks.planted.example.com",
                       wrote=True) == ([], [])
    nowhere = _state({})
    found, warned = consistency(1, Change((Edit(("size",), 3),)), START, nowhere, nowhere,
                                "tanks.planted.example.com", wrote=False)
    assert found == [] and warned == ["change 1: spec.size moved nothing the operators made "
                                      "and they wrote nothing (no effect seen)"]
    assert spots(before, True, "x") == [] and spots(before, 1, "x") == []  # not traceable


def test_a_field_left_empty_reads_as_absent_and_path_counters_go() -> None:
    """cass-operator writes its resource back with every struct field it has
    (``additionalSeedService: {}``): by changes it wrote before a change removed the field,
    directly after; a zero, an empty string or False still count."""
    def state(spec: dict[str, Any]) -> EndState:
        return _without_counters(EndState({"dcs <resource>": [
            {"spec": spec, "status": {"observedGeneration": len(spec)}}]}, {}, []))

    written_back = state({"service": {"seed": {}, "labels": {"a": "b"}}, "tolerations": [],
                          "note": None, "size": 1})
    removed = state({"service": {"labels": {"a": "b"}}, "size": 1})
    assert compare_end_states(written_back, removed, {}) == []
    for kept in ({"size": 0}, {"name": ""}, {"paused": False}):
        assert compare_end_states(state({**kept}), state({}), {}), kept
    # in the resource's own spec a zero is absent (omitempty when written back), in what the
    # operator makes it is the operator's answer
    def both(spec: dict[str, Any]) -> EndState:
        return _without_counters(EndState({
            "dcs <resource>": [{"spec": spec}],
            "services <resource>-svc": [{"spec": spec}]}, {}, []), "dcs")
    for zero in ({"size": 0}, {"name": ""}, {"admin": {"external": False}}):
        assert [d.split(":")[0] for d in compare_end_states(both(zero), both({}), {})] == [
            "changed"], zero
        assert "services <resource>-svc" in compare_end_states(both(zero), both({}), {})[0]
    assert " ".join(compare_end_states(both({"size": 1}), both({}), {})).count(
        "<resource>") == 2  # a size that is not zero: both differ
