"""Explored by tests/framework/test_planted_bugs.py: a Bucket deleted and made again."""

import os
from pathlib import Path

import pytest

from envtest import KopfOperator, eventually

HERE = Path(__file__).parent / "buckets"


def gone(k8s, namespace, name):
    try:
        k8s.custom.get_namespaced_custom_object("storage.example.com", "v1", namespace,
                                                "buckets", name)
    except Exception:
        return True
    return False


@pytest.mark.envtest_crds(str(HERE / "crd.yaml"))
def test_a_bucket_made_again_keeps_its_data(run_operator, apply, k8s, namespace):
    run_operator(KopfOperator(HERE / "handlers.py"), name="buckets",
                 env={"BUCKET_DELETE": os.environ.get("BUCKET_DELETE", "owned")})
    bucket = {"apiVersion": "storage.example.com/v1", "kind": "Bucket",
              "metadata": {"name": "photos"}, "spec": {"size": "1Gi"}}
    apply(bucket)
    eventually(lambda: k8s.core.read_namespaced_config_map("photos-data", namespace),
               timeout=20)
    k8s.custom.delete_namespaced_custom_object("storage.example.com", "v1", namespace,
                                               "buckets", "photos")
    eventually(lambda: gone(k8s, namespace, "photos"), timeout=20)
    apply(bucket)  # the same Bucket, made again
    data = eventually(lambda: k8s.core.read_namespaced_config_map("photos-data", namespace),
                      timeout=20)
    made = k8s.custom.get_namespaced_custom_object("storage.example.com", "v1", namespace,
                                                   "buckets", "photos")
    assert [o.uid for o in data.metadata.owner_references] == [made["metadata"]["uid"]]
