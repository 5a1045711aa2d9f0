"""Explored by tests/framework/test_planted_bugs.py: a parent ConfigMap deleted and made again."""

import os

import stores

from envtest import eventually

PARENT = {"metadata": {"name": "shop", "labels": {"kind": "parent"}}}


def gone(k8s, namespace, name):
    try:
        k8s.core.read_namespaced_config_map(name, namespace)
    except Exception:
        return True
    return False


def test_a_parent_made_again_keeps_its_store(run_operator, k8s, namespace):
    run_operator(stores.keeper(namespace, blind=os.environ.get("STORE_DELETE") == "blind"),
                 name="stores")
    k8s.core.create_namespaced_config_map(namespace, PARENT)
    eventually(lambda: k8s.core.read_namespaced_config_map("shop-store", namespace),
               timeout=10)
    k8s.core.delete_namespaced_config_map("shop", namespace)
    eventually(lambda: gone(k8s, namespace, "shop"), timeout=10)
    made = k8s.core.create_namespaced_config_map(namespace, PARENT)  # the same, made again
    store = eventually(lambda: k8s.core.read_namespaced_config_map("shop-store", namespace),
                       timeout=10)
    assert [o.uid for o in store.metadata.owner_references] == [made.metadata.uid]
