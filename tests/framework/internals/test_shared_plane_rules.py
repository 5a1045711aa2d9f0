"""Which tests a plane shared by the xdist workers cannot take, read from real pytest items:
they go to their worker's own plane, and the workers do not ask ahead for planes only they
would have used."""

from __future__ import annotations

import textwrap

import pytest

from envtest.pytest_plugin.session.shared_planes import needs_own_plane, shared_kinds

pytest_plugins = ["pytester"]

SUITE = textwrap.dedent("""
    import pytest

    def test_plain(envtest):
        pass

    @pytest.mark.envtest_private
    def test_private(envtest):
        pass

    def test_kubelet(kubelet):
        pass

    def test_nodes(nodes):
        pass

    def test_webhooks(webhooks):
        pass

    @pytest.mark.envtest_crds({"kind": "CustomResourceDefinition"}, conversion={"/c": len})
    def test_converted(envtest):
        pass

    @pytest.mark.envtest_crds({"kind": "CustomResourceDefinition"})
    def test_crds_alone(envtest):
        pass

    @pytest.mark.envtest_profile("cluster")
    def test_cluster(envtest):
        pass

    @pytest.mark.envtest_isolated
    def test_isolated(envtest):
        pass

    def test_no_cluster():
        pass
""")


def test_what_cannot_share_and_what_is_asked_for_ahead(pytester: pytest.Pytester) -> None:
    items = {item.name: item for item in pytester.getitems(SUITE)}
    own = {name for name, item in items.items() if needs_own_plane(item)}
    assert own == {"test_private", "test_kubelet", "test_nodes", "test_webhooks",
                   "test_converted"}
    assert shared_kinds(list(items.values())) == [(None, None, None), (None, None, "cluster")]
