"""The lean footprint's table of API versions, checked against every minor installed here.

``LEAN_DISABLED_GROUPS`` says in which minors kube-apiserver serves each
group version the lean footprint turns off; naming one a binary does not
register is a fatal start error, and leaving one of a group on can keep the
apiserver from ever being ready (flowcontrol v1beta3 up to 1.31).  Each
installed minor's kube-apiserver is asked (discovery, with its own defaults):
a version the table gives it, it serves; one the table does not, it does not
serve.  Then the lean footprint starts on it, and serves none of them.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from framework_helpers import K8S_CACHE, installed_minors

import envtest
from envtest.controlplane.components.footprint import LEAN_DISABLED_GROUPS, binary_minor, registers


def _group_versions(cluster: envtest.Cluster) -> set[str]:
    listing = envtest.request(cluster.api_client(), "GET", "/apis")
    return {version["groupVersion"] for group in listing["groups"]
            for version in group["versions"]}


@pytest.mark.parametrize("minor", sorted(installed_minors()) or [None])
def test_the_table_holds_for_the_binary(minor: int | None,
                                        make_control_plane: Callable[..., envtest.ControlPlane],
                                        ) -> None:
    if minor is None:
        pytest.skip(f"no Kubernetes installed in {K8S_CACHE}: envtest use 1.37")
    entry = installed_minors()[minor]
    # The binary says which minor it is (what a plane of unknown version goes by).
    assert binary_minor(entry / "kube-apiserver") == minor
    full = _group_versions(make_control_plane(version=f"1.{minor}", footprint="full"))
    for group_version, minors in LEAN_DISABLED_GROUPS.items():
        if registers(group_version, minor):
            assert group_version in full, f"1.{minor} does not serve {group_version}"
        else:
            assert group_version not in full, (f"1.{minor} serves {group_version}: the "
                                               f"table says only {minors}")
    lean = _group_versions(make_control_plane(version=f"1.{minor}", footprint="lean"))
    assert not lean & set(LEAN_DISABLED_GROUPS)
