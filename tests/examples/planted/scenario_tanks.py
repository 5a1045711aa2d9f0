"""Explored by tests/framework/test_planted_bugs.py with --envtest-explore=operations: a Tank
made and kept (``TANK_BUG`` names the bug of ``tanks.py``; none: its fixed twin)."""

import os
from pathlib import Path

import pytest
import tanks

from envtest import eventually

BUG = os.environ.get("TANK_BUG", "")
PACE = float(os.environ.get("TANK_PACE", "0"))
RESYNC = bool(os.environ.get("TANK_RESYNC"))
pytestmark = pytest.mark.envtest_crds(str(Path(__file__).parent / "tanks" / "crd.yaml"))


def test_a_tank_gets_its_parts_and_config(run_operator, k8s, namespace):
    run_operator(tanks.keeper(BUG, PACE, RESYNC), name="tanks")
    k8s.custom.create_namespaced_custom_object(
        tanks.GROUP, tanks.VERSION, namespace, tanks.PLURAL,
        {"apiVersion": f"{tanks.GROUP}/{tanks.VERSION}", "kind": "Tank",
         "metadata": {"name": "t"}, "spec": {"size": 2}})

    def made():
        names = {m.metadata.name for m in k8s.core.list_namespaced_config_map(
            namespace, label_selector="tank=t").items}
        return names - {"t-ready"} == {"t-config", "t-part-0", "t-part-1"}

    eventually(made, timeout=10)
