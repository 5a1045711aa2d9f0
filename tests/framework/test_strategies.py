"""``envtest.strategies``: what it draws is what the apiserver takes, changes leave the spec
they say, and a failing sequence shrinks to the change that fails.

The judge of "valid" is a real kube-apiserver with the CRD installed: every drawn spec is
created (its whole content kept, nothing pruned) and every drawn change is sent as the
merge patch it says, on a CRD with every kind of field (tests/framework/data/widgets.yaml).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import find, given
from hypothesis import strategies as st

from envtest import MERGE_PATCH, Clients, ConfigurationError, request, strategies
from envtest.strategies import Change, Edit

HERE = Path(__file__).parent
CRD = yaml.safe_load((HERE / "data" / "widgets.yaml").read_text())
GROUP, VERSION, PLURAL = "strategies.example.com", "v1", "widgets"
pytestmark = pytest.mark.envtest_crds("tests/framework/data/widgets.yaml")
pytest_plugins = ["pytester"]
_names = itertools.count()


def _path(namespace: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}" + (f"/{name}" if name else "")


def _create(k8s: Clients, namespace: str, spec: dict[str, Any], dry_run: bool = False
            ) -> dict[str, Any]:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget",
            "metadata": {"name": f"w{next(_names)}"}, "spec": spec}
    return request(k8s.api_client, "POST", _path(namespace), body=body,
                   query={"dryRun": "All"} if dry_run else None)


def _kept(drawn: Any, stored: Any) -> bool:
    """Whether everything drawn is stored as drawn (the apiserver may add defaults)."""
    if isinstance(drawn, dict):
        return isinstance(stored, dict) and all(
            key in stored and _kept(value, stored[key]) for key, value in drawn.items())
    return drawn == stored


def _default(path: tuple[str, ...]) -> Any:
    node = strategies.spec_field(CRD).node
    for part in path:
        node = node["properties"][part]
    return node.get("default")


@strategies.plane_settings(max_examples=40)
@given(spec=strategies.specs(CRD))
def test_every_drawn_spec_is_taken_whole_by_the_apiserver(k8s: Clients, namespace: str,
                                                           spec: dict[str, Any]) -> None:
    stored = _create(k8s, namespace, spec, dry_run=True)
    assert _kept(spec, stored["spec"]), (spec, stored["spec"])


@strategies.plane_settings(max_examples=12)
@given(data=st.data())
def test_drawn_changes_are_taken_and_leave_the_spec_they_say(k8s: Clients, namespace: str,
                                                             data: st.DataObject) -> None:
    created = _create(k8s, namespace, data.draw(strategies.specs(CRD), label="spec"))
    spec, name = created["spec"], created["metadata"]["name"]
    for change in data.draw(strategies.sequences(CRD, spec, most=3), label="changes"):
        patched = request(k8s.api_client, "PATCH", _path(namespace, name), body=change.patch,
                          content_type=MERGE_PATCH)["spec"]
        expected = change.apply(spec)
        for edit in change.edits:  # a removed field with a default is defaulted again
            if edit.removed and len(edit.path) == 1 and _default(edit.path) is not None:
                expected[edit.path[0]] = _default(edit.path)
        assert patched == expected, str(change)
        spec = patched


@strategies.plane_settings(max_examples=100, database=None)
@given(spec=strategies.specs(CRD),
       change=strategies.changes(CRD, {"replicas": 1, "image": "a:1", "extra": {"k": [1]}}))
def test_values_stay_where_a_user_sets_them(spec: dict[str, Any], change: Change) -> None:
    """Bounds honoured (the exclusive ones moved in), strings shaped like the value a field
    has, open content never edited."""
    assert 0 <= spec["replicas"] <= 5 and 0 <= spec.get("weight", 0) < 1
    assert 1025 <= spec.get("port", 1025) <= 65535
    assert spec["image"].startswith("registry.local/widget:") and spec["image"][-1].isdigit()
    assert {e.path for e in change.edits}.isdisjoint({("extra",), ("template",)})


@pytest.mark.parametrize("wanted", [
    lambda s: s["replicas"] == 5, lambda s: s["replicas"] == 0, lambda s: s.get("port") == 1025,
    lambda s: s.get("paused") is True, lambda s: s.get("storage", {}).get("size") == "1Gi",
], ids=["maximum", "minimum", "exclusive minimum moved in", "toggle", "shaped like default"])
def test_the_values_a_user_sets_are_drawn(wanted: Any) -> None:
    find(strategies.specs(CRD), wanted,
         settings=strategies.plane_settings(max_examples=2000, database=None))


def test_a_failing_sequence_shrinks_to_the_one_edit_that_fails() -> None:
    start = {"replicas": 3, "image": "registry.local/widget:1.4", "paused": False}
    shortest = find(strategies.sequences(CRD, start, most=4),
                    lambda changes: _final(start, changes).get("replicas") == 0,
                    settings=strategies.plane_settings(max_examples=500, database=None))
    assert shortest == [Change((Edit(("replicas",), 0),))]
    assert strategies.describe(shortest) == "# change 1: spec.replicas: 0\nspec:\n  replicas: 0"


@strategies.plane_settings(max_examples=6)
@given(spec=strategies.specs(CRD))
def test_every_edge_is_taken_and_stands_at_its_fields_edge(k8s: Clients, namespace: str,
                                                           spec: dict[str, Any]) -> None:
    """The apiserver takes each edge as sent (the exclusive minimum moved in, int32 and
    enums honoured), and each sets one field to a value unlike the one it had."""
    created = _create(k8s, namespace, spec)
    spec, name = created["spec"], created["metadata"]["name"]
    found = strategies.edges(CRD, spec, most=100)
    assert found and all(len(sequence) == 1 and len(sequence[0].edits) == 1
                         for sequence in found)
    for ((change,), (edit,)) in ((s, s[0].edits) for s in found):
        assert _final(spec, [change]) != spec, str(change)
        patched = request(k8s.api_client, "PATCH", _path(namespace, name), body=change.patch,
                          content_type=MERGE_PATCH, query={"dryRun": "All"})["spec"]
        assert _value(patched, edit.path) == edit.value, str(change)


def test_the_edges_of_a_spec_one_field_at_a_time() -> None:
    start = {"replicas": 3, "image": "registry.local/widget:1.4", "tier": "small",
             "paused": False, "storage": {"size": "1Gi", "backup": {"keep": 4}}}
    edges = [str(change) for (change,) in strategies.edges(CRD, start, most=100)]
    assert edges == [  # each field's first edge, the shallowest first; then the second
        "spec.replicas: 0", "spec.port: 1025", "spec.paused: true", "spec.tier: medium",
        "spec.storage.backup.enabled: true", "spec.storage.backup.keep: 1",
        "spec.replicas: 5", "spec.port: 65535", "spec.tier: large"]
    assert [str(c) for (c,) in strategies.edges(CRD, start)] == edges[:4]  # 4 by default
    assert [str(c) for (c,) in strategies.edges(CRD, start, only=["spec.storage.*"])] == \
        [edges[4], edges[5]]  # backup.enabled absent: read as false, so true alone
    assert strategies.edges(CRD, start, skip=["spec.replicas", "spec.port", "spec.paused",
                                              "spec.tier", "spec.storage"]) == []


def _value(spec: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        spec = spec.get(part, {})
    return spec


def _final(spec: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
    for change in changes:
        spec = change.apply(spec)
    return spec


def test_fields_are_read_from_the_schema_with_their_kinds() -> None:
    kinds = {f.name: f.kind for f in strategies.fields(CRD)}
    assert kinds["spec.replicas"] == "integer" and kinds["spec.tier"] == "enum"
    assert kinds["spec.maxUnavailable"] == "int-or-string"
    assert kinds["spec.labels"] == "map" and kinds["spec.labels.*"] == "string"
    assert kinds["spec.ports"] == "list" and kinds["spec.ports[].port"] == "integer"
    assert kinds["spec.extra"] == kinds["spec.template"] == "opaque"
    assert kinds["spec.storage.backup.keep"] == "integer"


def test_a_change_reads_as_the_merge_patch_it_sends() -> None:
    change = Change((Edit(("storage", "size"), "20Gi"), Edit(("paused",), removed=True)))
    assert change.patch == {"spec": {"storage": {"size": "20Gi"}, "paused": None}}
    assert str(change) == "spec.storage.size: 20Gi; spec.paused removed"
    assert change.apply({"paused": True, "storage": {"size": "1Gi", "class": "x"}}) == \
        {"storage": {"size": "20Gi", "class": "x"}}


@pytest.mark.parametrize(("crd", "message"), [
    ({"kind": "ConfigMap"}, "need a CustomResourceDefinition as a dict"),
    ({**CRD, "spec": {**CRD["spec"], "versions": CRD["spec"]["versions"]}}, "no version 'v9'"),
])
def test_a_crd_that_cannot_be_drawn_from_is_named_with_the_fix(crd: dict[str, Any],
                                                                message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        strategies.specs(crd, version="v9" if "v9" in message else None)


def test_a_failure_is_kept_where_ci_keeps_its_artifacts(pytester: pytest.Pytester,
                                                        tmp_path: Path) -> None:
    """Under ``--envtest-artifacts DIR``, plane_settings keeps Hypothesis' examples in
    ``DIR/hypothesis``; the next run given that folder draws the failure first."""
    pytester.makepyfile(test_kept="""
        from hypothesis import given, strategies as st
        from envtest import strategies

        @strategies.plane_settings(max_examples=200)
        @given(st.integers(0, 10**6))
        def test_small(n):
            assert n < 1000
    """)
    artifacts = tmp_path / "artifacts"
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                          f"--envtest-artifacts={artifacts}")
    first.assert_outcomes(failed=1)
    kept = [p for p in (artifacts / "hypothesis").rglob("*") if p.is_file()]
    assert kept, "no example kept under the artifacts folder"
    again = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                          f"--envtest-artifacts={artifacts}")
    again.assert_outcomes(failed=1)
    assert "n=1000" in again.stdout.str()  # the shrunk failure, drawn again
