"""The lean footprint (the default) serves every API an operator's test may use, and less;
``footprint="full"`` gives kube-apiserver's own defaults back."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

import envtest

OPERATOR_GROUPS = ("apps", "batch", "rbac.authorization.k8s.io", "coordination.k8s.io",
                   "admissionregistration.k8s.io", "events.k8s.io", "discovery.k8s.io",
                   "apiregistration.k8s.io", "apiextensions.k8s.io", "networking.k8s.io",
                   "policy", "autoscaling", "storage.k8s.io", "scheduling.k8s.io",
                   "certificates.k8s.io")


def _groups(cluster: envtest.Cluster) -> set[str]:
    listing = envtest.request(cluster.api_client(), "GET", "/apis")
    return {group["name"] for group in listing["groups"]}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_lean_serves_what_operators_use_and_not_the_rest(envtest) -> None:
    served = _groups(envtest)
    assert set(OPERATOR_GROUPS) <= served
    assert not served & {"flowcontrol.apiserver.k8s.io", "resource.k8s.io",
                         "storagemigration.k8s.io", "node.k8s.io"}
    command = psutil.Process(envtest.pids["kube-apiserver"]).cmdline()
    assert "--enable-priority-and-fairness=false" in command
    # ...and no in-flight limits in its stead: a test plane never throttles its controllers
    assert {"--max-requests-inflight=0", "--max-mutating-requests-inflight=0"} <= set(command)
    expected = os.environ.get("GOGC", "50")  # the environment's own setting wins
    for component in ("kube-apiserver", "etcd"):
        assert _environ(envtest.pids[component]).get("GOGC") == expected


def test_a_gogc_in_the_environment_wins_over_lean(make_control_plane, monkeypatch) -> None:
    """A scale test asks for less GC work than lean's GOGC=50 by setting GOGC itself."""
    monkeypatch.setenv("GOGC", "100")
    plane = make_control_plane(footprint="lean")  # started now, not taken from the pool
    for component in ("kube-apiserver", "etcd"):
        assert _environ(plane.pids[component]).get("GOGC") == "100"


def test_full_is_kube_apiservers_own_defaults(make_control_plane) -> None:
    full = make_control_plane(footprint="full")
    # Dynamic resource allocation is served by default from 1.34 (resource.k8s.io/v1, GA).
    dra = {"resource.k8s.io"} if int(full.version.split(".")[1]) >= 34 else set()
    assert {"flowcontrol.apiserver.k8s.io", "node.k8s.io", *dra} <= _groups(full)
    assert _environ(full.pids["kube-apiserver"]).get("GOGC") == os.environ.get("GOGC")
    command = psutil.Process(full.pids["kube-apiserver"]).cmdline()
    assert not any(arg.startswith(("--enable-priority-and-fairness", "--max-requests-inflight",
                                   "--max-mutating-requests-inflight")) for arg in command)


@pytest.mark.envtest_profile("cluster")
def test_the_cluster_profile_keeps_what_the_scheduler_watches(envtest) -> None:
    assert "resource.k8s.io" in _groups(envtest)


def test_an_unknown_footprint_names_the_choices() -> None:
    with pytest.raises(envtest.ConfigurationError, match="choose one of lean, full"):
        envtest.ControlPlane(footprint="tiny")
