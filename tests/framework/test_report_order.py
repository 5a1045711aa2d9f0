"""A failure report shows the test's own first: its custom resources, what it and its operator
wrote, the operator's calls; the cluster's components' after them.

On the cluster profile a failure report listed ConfigMaps, Endpoints and Pods first, and the
custom resource under test was the last of some 640 lines, never on the terminal; the
API-calls table showed the 15 busiest rows, all kube-controller-manager's, the kubelet's and
the scheduler's, and none of the operator's.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

pytest_plugins = ["pytester"]

INNER = textwrap.dedent('''
    import threading

    import kubernetes
    import pytest

    from envtest import eventually

    CRD = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.order.example.com"},
        "spec": {"group": "order.example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


    def keeper(namespace):
        def run(api_client, stop):
            core = kubernetes.client.CoreV1Api(api_client)
            while not stop.wait(0.2):
                try:
                    core.create_namespaced_config_map(namespace, {"metadata": {
                        "name": "gadget-settings"}})
                except kubernetes.client.ApiException:
                    pass
        return run


    @pytest.mark.envtest_profile("cluster")
    @pytest.mark.envtest_crds(CRD)
    def test_fails_with_a_busy_cluster(apply, k8s, namespace, run_operator):
        run_operator(keeper(namespace), name="gadgets")
        labels = {"app": "web"}
        apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": 4, "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels}, "spec": {
                            "containers": [{"name": "c", "image": "nginx"}]}}}})
        apply({"apiVersion": "order.example.com/v1", "kind": "Gadget",
               "metadata": {"name": "g"}, "spec": {"size": 1}})
        eventually(lambda: k8s.apps.read_namespaced_deployment(
            "web", namespace).status.ready_replicas == 4, timeout=60)
        eventually(lambda: k8s.core.read_namespaced_config_map("gadget-settings", namespace))
        assert False, "failing on purpose"
''')


def test_the_tests_own_objects_and_calls_come_first(own_plane_pytester: Any) -> None:
    own_plane_pytester.makepyfile(test_inner=INNER)
    result = own_plane_pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    objects = output.split("envtest: objects in namespace", 1)[1]
    kinds = re.findall(r"^kind: (\w+)$", objects, re.M)
    assert kinds and kinds[0] == "Gadget", kinds[:6]
    # What the test and its operator wrote come next; the Pods the ReplicaSet made last
    # (past what the terminal shows, here: the full section is in the artifacts).
    first_pod = kinds.index("Pod") if "Pod" in kinds else len(kinds)
    assert "Deployment" in kinds[:first_pod] and "ConfigMap" in kinds[:first_pod], kinds
    calls = output.split("envtest: API calls during the test", 1)[1].splitlines()
    rows = [line.split() for line in calls[2:8] if line.strip() and line.split()[0].isdigit()]
    assert rows and rows[0][1] == "pytest-envtest:gadgets", calls[:8]
    users = [row[1] for row in rows]
    assert users.index("envtest-admin") > users.index("pytest-envtest:gadgets"), users
