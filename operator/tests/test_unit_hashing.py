import copy

from ray_operator.controllers.hashing import cluster_hash, scaling_fields

SPEC = {
    "rayVersion": "2.9.0",
    "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "i"}]}}},
    "workerGroupSpecs": [
        {
            "groupName": "small",
            "replicas": 3,
            "minReplicas": 0,
            "maxReplicas": 10,
            "scaleStrategy": {"workersToDelete": ["w-1"]},
            "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}},
        }
    ],
}


def test_hash_ignores_replicas_and_workers_to_delete():
    edited = copy.deepcopy(SPEC)
    edited["workerGroupSpecs"][0]["replicas"] = 7
    edited["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] = ["w-2", "w-3"]
    assert cluster_hash(edited) == cluster_hash(SPEC)


def test_hash_treats_absent_and_empty_scale_strategy_alike():
    bare = copy.deepcopy(SPEC)
    del bare["workerGroupSpecs"][0]["scaleStrategy"]
    del bare["workerGroupSpecs"][0]["replicas"]
    assert cluster_hash(bare) == cluster_hash(SPEC)


def test_hash_changes_with_anything_else():
    for path, value in [
        (("rayVersion",), "2.10.0"),
        (("workerGroupSpecs", 0, "maxReplicas"), 11),
        (("workerGroupSpecs", 0, "template", "spec", "containers", 0, "image"), "other"),
    ]:
        edited = copy.deepcopy(SPEC)
        target = edited
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        assert cluster_hash(edited) != cluster_hash(SPEC), path


def test_hash_is_independent_of_key_order_and_does_not_mutate():
    reordered = dict(reversed(list(copy.deepcopy(SPEC).items())))
    before = copy.deepcopy(SPEC)
    assert cluster_hash(reordered) == cluster_hash(SPEC)
    assert before == SPEC
    assert len(cluster_hash(SPEC)) == 32  # base32 of SHA-1


def test_scaling_fields():
    assert scaling_fields(SPEC) == {"small": {"replicas": 3, "workersToDelete": ["w-1"]}}
