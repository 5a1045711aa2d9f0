"""Explored by tests/framework/test_planted_bugs.py: a Shelf deleted and made again, its claim
made again by the StatefulSet controller."""

import os
import sys
from pathlib import Path

import pytest

from envtest import eventually

HERE = Path(__file__).parent / "shelves"
GROUP, VERSION, PLURAL = "storage.example.com", "v1", "shelves"
SHELF = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Shelf", "metadata": {"name": "books"}}

# The claim protection holds a claim while a Pod uses it (the apiserver puts its finalizer on
# every claim): its controller takes it off once the Pod is gone.
pytestmark = [pytest.mark.envtest_profile("cluster"),
              pytest.mark.envtest_controllers("pvc-protection"),
              pytest.mark.envtest_crds(str(HERE / "crd.yaml"))]


def claim(k8s, namespace):
    return k8s.core.read_namespaced_persistent_volume_claim("data-books-0", namespace)


def reported(k8s, namespace):
    shelf = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "books")
    return (shelf.get("status") or {}).get("claims")


def gone(read):
    try:
        read()
    except Exception as error:
        return getattr(error, "status", None) == 404
    return False


def test_a_shelf_made_again_keeps_its_claim(run_operator, apply, k8s, namespace):
    run_operator([sys.executable, str(HERE / "shelves.py"), "--kubeconfig", "{kubeconfig}",
                  "--namespace", namespace], name="shelves",
                 env={"SHELF_CLAIMS": os.environ.get("SHELF_CLAIMS", "owned")})
    apply(SHELF)
    eventually(lambda: claim(k8s, namespace), timeout=30)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "books")
    eventually(lambda: gone(lambda: claim(k8s, namespace)), timeout=30)
    eventually(lambda: gone(lambda: k8s.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "books")), timeout=30)
    made = apply(SHELF)[0]  # the same, made again: its StatefulSet makes its claim again
    found = eventually(lambda: claim(k8s, namespace), timeout=30)
    assert found.metadata.labels["shelf-uid"] == made["metadata"]["uid"]
    eventually(lambda: reported(k8s, namespace) == 1, timeout=30)  # the keeper saw it
