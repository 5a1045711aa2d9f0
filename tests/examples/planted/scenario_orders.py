"""Explored by tests/framework/test_planted_bugs.py: an order placed with the Go order keeper
(``ORDER_KEEPER``: its binary; ``ORDER_KEEPER_UNSAFE=1``: the variant with the bug)."""

import os

from envtest import eventually


def test_every_order_gets_its_receipt(run_operator, k8s, namespace):
    run_operator([os.environ["ORDER_KEEPER"], "--kubeconfig", "{kubeconfig}", "--namespace",
                  namespace, "--heartbeat", "150ms",
                  *(["--unsafe"] if os.environ.get("ORDER_KEEPER_UNSAFE") else [])],
                 name="order-keeper")
    # Up and beating before the order comes (a crash after a beat then never meets it).
    eventually(lambda: k8s.core.read_namespaced_config_map("order-keeper-heartbeat", namespace),
               timeout=10)
    k8s.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "order-1", "labels": {"order": "open"}}})
    eventually(lambda: k8s.core.read_namespaced_config_map(
        "order-1", namespace).metadata.labels["order"] == "done", timeout=10)
    eventually(lambda: k8s.core.read_namespaced_config_map("order-1-receipt", namespace),
               timeout=5)
