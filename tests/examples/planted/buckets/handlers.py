"""A bucket keeper in kopf, with a stale-state bug (``BUCKET_DELETE=blind``) and its twin.

Each Bucket gets its data, a ConfigMap ``<bucket>-data`` it owns.  When a Bucket is deleted
the keeper deletes its data first (kopf holds the Bucket with its finalizer until the delete
handler succeeded).  Deleting the data by its name, ``blind``, is the bug Sieve found in
RabbitMQ's and ZooKeeper's operators (rabbitmq/cluster-operator#648, pravega/zookeeper-
operator#312): an instance restarted with a view of the cluster that lags, which still shows
the old Bucket being deleted after it was made again, deletes the *new* Bucket's data.
``owned`` deletes only data the Bucket being deleted owns (its uid among the data's owners),
with the data's uid as the delete's precondition.

A timer stamps each Bucket's ``status.heartbeat`` every 0.5 s: writes whose number before any
other varies from run to run.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "storage.example.com", "v1", "buckets"
RETRY_SECONDS = 1.0


def _mode() -> str:
    return os.environ.get("BUCKET_DELETE", "owned")


@kopf.on.create(GROUP, VERSION, PLURAL, backoff=RETRY_SECONDS)
@kopf.on.resume(GROUP, VERSION, PLURAL, backoff=RETRY_SECONDS)
def ensure_data(name: str, namespace: str, spec: dict[str, Any], **_: Any) -> None:
    """The Bucket's data, owned by it (AlreadyExists: made before a restart)."""
    data: dict[str, Any] = {"metadata": {"name": f"{name}-data", "labels": {"bucket": name}},
                            "data": {"size": str(spec.get("size", "1Gi"))}}
    kopf.adopt(data)
    try:
        kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, data)
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise


@kopf.on.delete(GROUP, VERSION, PLURAL, backoff=RETRY_SECONDS)
def release_data(name: str, namespace: str, uid: str, **_: Any) -> None:
    """The Bucket's data goes before the Bucket does."""
    core = kubernetes.client.CoreV1Api()
    try:
        if _mode() == "blind":  # the bug: whatever data of that name there is now
            core.delete_namespaced_config_map(f"{name}-data", namespace)
            return
        data = core.read_namespaced_config_map(f"{name}-data", namespace)
        if uid not in [owner.uid for owner in data.metadata.owner_references or []]:
            return  # another Bucket of that name owns it now: not this one's to delete
        core.delete_namespaced_config_map(
            f"{name}-data", namespace, body=kubernetes.client.V1DeleteOptions(
                preconditions=kubernetes.client.V1Preconditions(uid=data.metadata.uid)))
    except kubernetes.client.ApiException as error:
        if error.status not in (404, 409):  # gone already, or not the data it read
            raise


_beats = itertools.count(1)


@kopf.timer(GROUP, VERSION, PLURAL, interval=0.5)
def heartbeat(patch: kopf.Patch, **_: Any) -> None:
    patch.status["heartbeat"] = next(_beats)
