"""One list of controller names, one class each; import paths used outside; no test framework."""

import subprocess
import sys

import pytest

from ray_operator import Operator, OperatorConfig
from ray_operator.config import CONTROLLERS
from ray_operator.controllers.registry import CONTROLLER_TYPES


def test_the_registry_has_a_class_for_each_named_controller():
    assert tuple(CONTROLLER_TYPES) == CONTROLLERS == ("raycluster", "rayservice", "rayjob")
    assert OperatorConfig().controllers == CONTROLLERS
    for name, factory in CONTROLLER_TYPES.items():
        assert factory.name == name
    with pytest.raises(ValueError, match="unknown controllers"):
        OperatorConfig(controllers=("raycluster", "nope"))


def test_controllers_are_reachable_only_once_running():
    operator = Operator(api_client=None)
    with pytest.raises(LookupError, match="'rayservice'"):
        operator.controller("rayservice")


def test_import_paths_used_outside_the_package():
    from ray_operator.controllers.statusdiff import without_timestamps
    from ray_operator.resources import PODS, RAYCLUSTERS
    from ray_operator.testing import (
        SERVE_PATH,
        FakeDashboardFleet,
        FakeRayDashboard,
        ServePolicy,
        fake_dashboard,
    )

    assert fake_dashboard.SERVE_PATH == SERVE_PATH == "/api/serve/applications/"
    assert fake_dashboard.FakeRayDashboard is FakeRayDashboard
    assert fake_dashboard.ServePolicy is ServePolicy
    assert callable(without_timestamps) and FakeDashboardFleet
    assert (PODS.plural, RAYCLUSTERS.plural) == ("pods", "rayclusters")


def test_the_operator_imports_no_test_framework():
    code = (
        "import importlib, pkgutil, sys, ray_operator\n"
        "for m in pkgutil.walk_packages(ray_operator.__path__, 'ray_operator.'):\n"
        "    if m.name != 'ray_operator.__main__':\n"
        "        importlib.import_module(m.name)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('envtest', 'pytest', '_pytest')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
