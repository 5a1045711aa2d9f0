"""White-box tests of the plugin's cluster pool: the background namespace reaper's own user.

Internal on purpose (see README "Contributing"): the reaper works between
tests, so only the pool entry it lives on can hand it to a test.
"""

from __future__ import annotations

from typing import Any

import pytest

from envtest import NAMESPACE_REAPER_USER, ApiCalls, Clients, create_namespace, namespace_name
from envtest.pytest_plugin.session.cluster_entry import ClusterEntry

ADMIN = "envtest-admin"


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_background_namespace_cleanup_acts_as_its_own_user(api_calls: ApiCalls,
                                                           envtest_entry: ClusterEntry,
                                                           k8s: Clients) -> None:
    # Earlier tests' namespaces are swept while later tests run: not the tests' own calls.
    if envtest_entry.reaper is None:
        pytest.skip("namespace cleanup is not in the background in this run")
    name = namespace_name("swept-here")
    create_namespace(k8s.api_client, name)
    k8s.core.create_namespaced_config_map(name, config_map("x"))
    envtest_entry.reaper.reap(name)
    envtest_entry.reaper.wait(name)
    sweeps = api_calls.calls(user=NAMESPACE_REAPER_USER, namespace=name,
                             verb=["delete", "deletecollection"])
    assert len(sweeps) > 1  # asked for by user: there
    assert api_calls.count(namespace=name, verb=["delete", "deletecollection"]) == 0  # else not
    assert api_calls.count(user=ADMIN, verb=["delete", "deletecollection"]) == 0
    assert NAMESPACE_REAPER_USER not in api_calls.summary()
