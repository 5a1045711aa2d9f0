import pytest

from ray_operator.controllers.podbuilder import (
    build_head_pod,
    build_head_service,
    build_worker_pod,
    head_ports,
)
from ray_operator.controllers.validation import desired_worker_replicas, validate_cluster_spec

CONTAINER = {"name": "ray", "image": "rayproject/ray:2.9.0"}


def cluster(created_by=None):
    labels = {"app.kubernetes.io/created-by": created_by} if created_by else {}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "ns", "uid": "u-1", "labels": labels},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {"num-cpus": "0"},
                "template": {
                    "metadata": {"labels": {"team": "a", "ray.io/cluster": "spoofed"}},
                    "spec": {
                        "containers": [
                            {**CONTAINER, "ports": [{"name": "dashboard", "containerPort": 9000}]}
                        ]
                    },
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": "small",
                    "replicas": 2,
                    "template": {"spec": {"containers": [CONTAINER]}},
                }
            ],
        },
    }


def test_head_pod_labels_and_owner_are_kuberays():
    pod = build_head_pod(cluster())
    meta = pod["metadata"]
    assert meta["generateName"] == "rc-head-"
    assert meta["labels"] == {
        "team": "a",
        "ray.io/cluster": "rc",
        "ray.io/node-type": "head",
        "ray.io/group": "headgroup",
        "ray.io/identifier": "rc-head",
        "ray.io/is-ray-node": "yes",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": "rc",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    args = pod["spec"]["containers"][0]["args"][0]
    assert (
        "ray start --head" in args and "--num-cpus=0" in args and "--dashboard-host=0.0.0.0" in args
    )


def test_worker_pod_and_serve_label_for_rayservice_clusters():
    spec = cluster("rayservice")
    pod = build_worker_pod(spec, spec["spec"]["workerGroupSpecs"][0])
    assert pod["metadata"]["generateName"] == "rc-worker-small-"
    assert pod["metadata"]["labels"]["ray.io/group"] == "small"
    assert pod["metadata"]["labels"]["ray.io/serve"] == "true"
    assert (
        "--address=rc-head-svc.ns.svc.cluster.local:6379" in pod["spec"]["containers"][0]["args"][0]
    )
    assert "ray.io/serve" not in build_head_pod(cluster())["metadata"]["labels"]


def test_head_service_ports_come_from_the_container_with_defaults():
    service = build_head_service(cluster())
    assert service["metadata"]["name"] == "rc-head-svc"
    assert service["spec"]["selector"] == {"ray.io/cluster": "rc", "ray.io/node-type": "head"}
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {
        "client": 10001,
        "gcs-server": 6379,
        "dashboard": 9000,
        "metrics": 8080,
        "serve": 8000,
    }
    assert head_ports({})["dashboard"] == 8265


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        ({"replicas": 3, "minReplicas": 0, "maxReplicas": 10}, 3),
        ({"replicas": 30, "minReplicas": 0, "maxReplicas": 10}, 10),
        ({"replicas": 0, "minReplicas": 2, "maxReplicas": 10}, 2),
        ({"minReplicas": 2, "maxReplicas": 10}, 2),
        ({}, 0),
    ],
)
def test_desired_replicas_are_clamped(group, expected):
    assert desired_worker_replicas(group) == expected


def test_validation_names_the_problems():
    good = cluster()["spec"]
    assert validate_cluster_spec(good) == []
    bad = cluster()["spec"]
    bad["headGroupSpec"]["template"]["spec"]["containers"] = []
    bad["workerGroupSpecs"][0].update(minReplicas=5, maxReplicas=2)
    bad["workerGroupSpecs"].append(dict(bad["workerGroupSpecs"][0]))
    problems = validate_cluster_spec(bad)
    assert "headGroupSpec: the Pod template has no container" in problems
    assert any("minReplicas 5 is greater than maxReplicas 2" in p for p in problems)
    assert any("used twice" in p for p in problems)
