"""Every served resource, on every minor installed here: aggregated discovery is v2 from 1.30,
v2beta1 on 1.29 (asked for too: without it 1.29 answered the plain listing, read as empty,
and every test of the operator suite failed to find its CRDs), and the plain listing, read
group by group, says the same."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from framework_helpers import WIDGET_CRD, installed_minors

import envtest
from envtest.api.objects.mapping import RestMapper


@pytest.mark.parametrize("minor", sorted(installed_minors()) or [None])
def test_all_resources_on_the_minor(minor: int | None,
                                    make_control_plane: Callable[..., envtest.ControlPlane],
                                    ) -> None:
    if minor is None:
        pytest.skip("no Kubernetes installed: envtest use 1.37")
    plane = make_control_plane(version=f"1.{minor}", crds=[WIDGET_CRD])
    api = plane.api_client()
    mapper = RestMapper(api)
    aggregated = {(info.group, info.plural) for info in mapper.all_resources()}
    assert {("", "pods"), ("apps", "deployments"), ("example.com", "widgets")} <= aggregated
    plain = {(info.group, info.plural) for path in ("/api", "/apis")
             for info in mapper._unaggregated(envtest.request(api, "GET", path))}
    assert plain == aggregated
