"""The test cluster speaks to any client through its kubeconfig: the official client, kr8s and
lightkube each create, read and delete an object as the admin, and see a user's RBAC."""

from __future__ import annotations

from pathlib import Path

import kr8s
import kubernetes
import lightkube
import pytest
from lightkube.config.kubeconfig import KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from envtest import Cluster


@pytest.mark.filterwarnings("ignore:Kubernetes version .* is not supported:UserWarning")
def test_three_clients_one_cluster(kubeconfig: Path, namespace: str, k8s, envtest: Cluster):
    official = kubernetes.config.new_client_from_config(str(kubeconfig))
    kubernetes.client.CoreV1Api(official).create_namespaced_config_map(
        namespace, {"metadata": {"name": "from-official"}, "data": {"by": "official"}})

    api = kr8s.api(kubeconfig=str(kubeconfig))
    kr8s.objects.ConfigMap({"metadata": {"name": "from-kr8s", "namespace": namespace},
                            "data": {"by": "kr8s"}}, api=api).create()

    light = lightkube.Client(config=KubeConfig.from_file(kubeconfig))
    light.create(ConfigMap(metadata=ObjectMeta(name="from-lightkube", namespace=namespace),
                           data={"by": "lightkube"}))

    seen = {c.metadata.name: c.data["by"]
            for c in k8s.core.list_namespaced_config_map(namespace).items
            if c.metadata.name.startswith("from-")}
    assert seen == {"from-official": "official", "from-kr8s": "kr8s",
                    "from-lightkube": "lightkube"}
    assert {cm.name for cm in api.get("configmaps", namespace=namespace)} >= set(seen)
    assert light.get(ConfigMap, "from-kr8s", namespace=namespace).data == {"by": "kr8s"}

    # A user without rights is refused, whatever the client.
    nobody = envtest.add_user("pytest-envtest:nobody-with-clients")
    with pytest.raises(lightkube.ApiError) as refused:
        lightkube.Client(config=KubeConfig.from_file(nobody.kubeconfig_path)).get(
            ConfigMap, "from-kr8s", namespace=namespace)
    assert refused.value.status.code == 403
