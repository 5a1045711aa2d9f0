"""``cluster.kubectl()`` keeps its discovery cache with the cluster, not in ``~/.kube/cache``.

kubectl caches discovery per server address; every control plane has a new port, so the
user's cache grew with every run (13 MB seen).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from framework_helpers import KUBECTL

from envtest import ControlPlane, ExistingCluster


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own, and the repository's kubectl."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TEST_ASSET_KUBECTL", str(KUBECTL))
    return tmp_path


def test_kubectl_leaves_no_discovery_cache_in_home(envtest: ControlPlane, home: Path) -> None:
    listed = envtest.kubectl("api-resources", "-o", "name")  # discovery of every group
    assert listed.returncode == 0, listed.stderr
    assert "configmaps" in listed.stdout.split()
    assert not (home / ".kube").exists()
    assert envtest.workdir is not None
    assert (envtest.workdir / "kube-cache" / "discovery").is_dir()  # removed with the plane


def test_an_existing_clusters_kubectl_leaves_none_either(envtest: ControlPlane,
                                                         home: Path) -> None:
    with ExistingCluster(envtest.kubeconfig_path) as existing:
        listed = existing.kubectl("get", "namespace", "default", "-o", "name")
    assert (listed.returncode, listed.stdout.strip()) == (0, "namespace/default"), listed.stderr
    assert not (home / ".kube").exists()
