"""Project glue for this repository's own tests (the plugin itself loads by entry point)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envtest.binaries import Resolver
from envtest.versions import Version

ROOT = Path(__file__).resolve().parent
OPERATOR_CRDS = ROOT / "operator" / "config" / "crd"
OPERATOR_RBAC = ROOT / "operator" / "config" / "rbac"


@pytest.fixture(scope="session")
def default_binaries_version() -> Version:
    """The Kubernetes version this run tests (``make test`` has built it already)."""
    version = Resolver(os.environ.get("ENVTEST_K8S_VERSION")).resolve_version()
    return version
