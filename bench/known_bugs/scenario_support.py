"""What the known-bug scenarios share: local volumes for the claims, a wait for a 404, a
Pod's phase.

Copied beside each scenario into the folder it runs in (no conftest or package of this
repository is there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client import StorageV1Api


def local_volumes(k8s: Any, namespace: str, expandable: bool = False,
                  count: int = 4) -> Iterator[str]:
    """A StorageClass (one that may expand, if asked) and ``count`` volumes of 20Gi for the
    claims to bind to (a released volume is not bound again: one per claim the workloads
    make); its name, then all of it removed."""
    name = f"local-{namespace}"
    storage = StorageV1Api(k8s.api_client)
    storage.create_storage_class({"metadata": {"name": name},
                                  "provisioner": "kubernetes.io/no-provisioner",
                                  "allowVolumeExpansion": expandable,
                                  "volumeBindingMode": "Immediate"})
    made = []
    for index in range(count):
        volume = {"metadata": {"name": f"{name}-{index}"}, "spec": {
            "capacity": {"storage": "20Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": name, "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/{name}-{index}"}}}
        k8s.core.create_persistent_volume(volume)
        made.append(volume["metadata"]["name"])
    yield name
    for volume_name in made:
        k8s.core.delete_persistent_volume(volume_name)
    storage.delete_storage_class(name)


def gone(read: Callable[[], Any]) -> bool:
    """Whether ``read()`` answers 404 (any other answer or error: not gone)."""
    try:
        read()
    except Exception as error:
        return getattr(error, "status", None) == 404
    return False


def pod_running(k8s: Any, namespace: str, name: str) -> bool:
    """Whether the Pod ``name`` is there and Running."""
    try:
        pod = k8s.core.read_namespaced_pod(name, namespace)
    except Exception:
        return False
    return pod.status.phase == "Running"
