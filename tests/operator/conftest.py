"""tests/operator: every test here gets the Ray CRDs installed (the Ray wiring fixtures
``ray_operator``, ``dashboards`` and ``serve_policy`` live in the root conftest)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "operator" / "config" / "crd"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.envtest_crds(str(CRDS)))
