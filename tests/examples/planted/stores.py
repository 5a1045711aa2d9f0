"""A store keeper whose parent is a built-in kind: a stale-state bug, and its twin.

A parent is a ConfigMap labelled ``kind=parent``; the keeper puts its finalizer on it and
makes its store, a ConfigMap ``<parent>-store`` the parent owns (an ownerReference).  When
the parent is being deleted, the keeper deletes its store, then takes its finalizer off
(an update of the version it read: a stale copy is refused 409).

- ``blind=True`` deletes ``<parent>-store`` by name: restarted with a stale view (the old
  parent being deleted, after a new parent of that name was made and got its store), it
  deletes the *new* parent's store.  The bug of RabbitMQ's and ZooKeeper's operators
  (rabbitmq/cluster-operator#648, pravega/zookeeper-operator#312), with nothing custom:
  exploration must find it from the owner reference alone;
- ``blind=False`` deletes the store only if the parent being deleted owns it (its uid
  among the store's owners), with the store's uid as the delete's precondition.

It polls the parents (a list every 0.1 s).
"""

from __future__ import annotations

import threading
from typing import Any

import kubernetes

FINALIZER = "example.com/store"
POLL_SECONDS = 0.1


def keeper(namespace: str, blind: bool = True) -> Any:
    """The operator (``run_operator(keeper(namespace, blind=False))``); see the module."""

    def run(api_client: kubernetes.client.ApiClient, stop: threading.Event) -> None:
        core = kubernetes.client.CoreV1Api(api_client)

        def release(parent: Any) -> None:
            name = parent.metadata.name
            store = f"{name}-store"
            try:
                if blind:  # the bug: whatever store of that name there is now
                    core.delete_namespaced_config_map(store, namespace)
                else:
                    found = core.read_namespaced_config_map(store, namespace)
                    if parent.metadata.uid in [o.uid for o in
                                               found.metadata.owner_references or []]:
                        core.delete_namespaced_config_map(
                            store, namespace, body=kubernetes.client.V1DeleteOptions(
                                preconditions=kubernetes.client.V1Preconditions(
                                    uid=found.metadata.uid)))
            except kubernetes.client.ApiException as error:
                if error.status not in (404, 409):
                    raise
            parent.metadata.finalizers = [f for f in parent.metadata.finalizers or []
                                          if f != FINALIZER]
            core.replace_namespaced_config_map(name, namespace, parent)

        def keep(parent: Any) -> None:
            name = parent.metadata.name
            if FINALIZER not in (parent.metadata.finalizers or []):
                parent.metadata.finalizers = [*(parent.metadata.finalizers or []), FINALIZER]
                core.replace_namespaced_config_map(name, namespace, parent)
            try:
                core.create_namespaced_config_map(namespace, {"metadata": {
                    "name": f"{name}-store", "ownerReferences": [{
                        "apiVersion": "v1", "kind": "ConfigMap", "name": name,
                        "uid": parent.metadata.uid}]}, "data": {"items": "0"}})
            except kubernetes.client.ApiException as error:
                if error.status != 409:
                    raise

        while not stop.wait(POLL_SECONDS):
            for parent in core.list_namespaced_config_map(
                    namespace, label_selector="kind=parent").items:
                try:
                    if parent.metadata.deletion_timestamp:
                        if FINALIZER in (parent.metadata.finalizers or []):
                            release(parent)
                    else:
                        keep(parent)
                except kubernetes.client.ApiException as error:
                    if error.status not in (404, 409):  # gone, or a newer one: next pass
                        raise

    return run
