"""KubeObject: one shape for every object the framework hands out, built-in kinds included."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from envtest import FieldMissing, KubeObject, is_not_yet

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "shop",
                           "creationTimestamp": "2026-12-01T10:00:00Z"},
              "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "app"}]}}},
              "status": {"readyReplicas": 2, "conditions": [{"type": "Available"}]}}


def test_as_served_with_attribute_and_snake_case_access() -> None:
    deployment = KubeObject(copy.deepcopy(DEPLOYMENT))
    assert deployment.status.readyReplicas == deployment.status.ready_replicas == 2
    assert deployment.metadata.creation_timestamp == "2026-12-01T10:00:00Z"
    assert deployment.spec.template.spec.containers[0].name == "app"
    assert deployment == DEPLOYMENT and json.loads(json.dumps(deployment)) == DEPLOYMENT
    assert yaml.safe_load(yaml.safe_dump(deployment)) == DEPLOYMENT
    assert copy.deepcopy(deployment).status.readyReplicas == 2


def test_a_missing_field_names_what_is_there_and_counts_as_not_yet() -> None:
    deployment = KubeObject(copy.deepcopy(DEPLOYMENT))
    with pytest.raises(FieldMissing) as missing:
        deployment.status.availableReplicas  # noqa: B018
    assert "Deployment shop/web.status has no field 'availableReplicas'" in str(missing.value)
    assert "it has: conditions, readyReplicas" in str(missing.value)
    assert isinstance(missing.value, KeyError) and isinstance(missing.value, AttributeError)
    assert is_not_yet(missing.value)
    assert not is_not_yet(KeyError("a plain dict's key"))
    assert deployment.status.get("availableReplicas", 0) == 0


def test_changes_through_attributes_and_items_reach_the_object() -> None:
    deployment = KubeObject(copy.deepcopy(DEPLOYMENT))
    deployment.spec.template.spec.containers[0]["image"] = "nginx"
    deployment["spec"]["replicas"] = 3
    plain = deployment.to_dict()
    assert plain["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert plain["spec"]["replicas"] == 3
    assert type(plain["spec"]["template"]) is dict


def test_a_field_named_like_a_dict_method_wins() -> None:
    listing = KubeObject({"kind": "PodList", "items": [{"metadata": {"name": "a"}}]})
    assert listing.items[0].metadata.name == "a"
    assert dict(KubeObject({"a": 1}).items()) == {"a": 1}


def test_wait_for_hands_out_kubeobjects_for_builtin_kinds(apply, wait_for) -> None:
    apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
    deployment = wait_for("Deployment", "web", lambda d: d.spec.replicas == 2)
    assert isinstance(deployment, KubeObject)
    assert deployment.spec.template.spec.containers[0].image == "nginx"
