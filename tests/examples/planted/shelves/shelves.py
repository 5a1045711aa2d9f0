"""A shelf keeper, run as a command: its claims are made by the StatefulSet controller, not by it.

Each ``Shelf`` (``storage.example.com/v1``) gets a StatefulSet of one replica it owns, whose
claim template ``data`` makes a claim ``data-<shelf>-0``, labelled with the shelf's name and
uid.  When a Shelf is being deleted, the keeper deletes its StatefulSet (else the
StatefulSet controller makes the claims again), then its claims (the data goes with the
shelf), then takes its finalizer off.  Each
pass it reports how many claims the shelf has (``status.claims``), so it reads the claims:
a claim made again after a Shelf was made again is one it sees.

- ``SHELF_CLAIMS=blind`` deletes the StatefulSet by name and the claims labelled with the
  shelf's *name*: restarted with
  a stale view (the old Shelf being deleted, after a new one of that name was made and the
  StatefulSet controller made its claim again), it deletes the *new* shelf's claim.
  ZooKeeper's operator, before its fix (pravega/zookeeper-operator#312, #313): the object
  it deletes by mistake is made by another controller, never by the operator;
- ``SHELF_CLAIMS=owned`` deletes the StatefulSet only if the Shelf being deleted owns it
  (with its uid as the precondition) and the claims labelled with that Shelf's uid (the
  fix ZooKeeper's operator took).

    python shelves.py --kubeconfig PATH --namespace NS
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import kubernetes

GROUP, VERSION, PLURAL = "storage.example.com", "v1", "shelves"
FINALIZER = "storage.example.com/claims"
POLL_SECONDS = 0.2


def statefulset(shelf: dict[str, Any]) -> dict[str, Any]:
    meta = shelf["metadata"]
    name, uid = meta["name"], meta["uid"]
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {
        "name": name, "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "Shelf",
                                           "name": name, "uid": uid, "controller": True}]},
        "spec": {"replicas": 1, "serviceName": name, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "shelf", "image": "busybox",
                      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {
                     "shelf": name, "shelf-uid": uid}}, "spec": {
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}]}}


def main(kubeconfig: str, namespace: str) -> None:
    api = kubernetes.config.new_client_from_config(kubeconfig)
    custom = kubernetes.client.CustomObjectsApi(api)
    core = kubernetes.client.CoreV1Api(api)
    apps = kubernetes.client.AppsV1Api(api)
    blind = os.environ.get("SHELF_CLAIMS", "owned") == "blind"

    def claims(selector: str) -> list[Any]:
        return core.list_namespaced_persistent_volume_claim(
            namespace, label_selector=selector).items

    def release(shelf: dict[str, Any]) -> None:
        """The StatefulSet first (else it makes the claims again), then the claims, then the
        finalizer: each pass goes as far as it can."""
        meta = shelf["metadata"]
        try:
            found = apps.read_namespaced_stateful_set(meta["name"], namespace)
            if blind or meta["uid"] in [o.uid for o in found.metadata.owner_references or []]:
                apps.delete_namespaced_stateful_set(
                    meta["name"], namespace, body=kubernetes.client.V1DeleteOptions(
                        preconditions=None if blind else kubernetes.client.V1Preconditions(
                            uid=found.metadata.uid)))
                return  # deleted now: gone by a later pass
        except kubernetes.client.ApiException as error:
            if error.status != 404:
                raise
        selector = f"shelf={meta['name']}" if blind else f"shelf-uid={meta['uid']}"
        left = claims(selector)  # blind: whatever claims of that name there are now
        for claim in left:
            if not claim.metadata.deletion_timestamp:
                core.delete_namespaced_persistent_volume_claim(claim.metadata.name, namespace)
        if left:
            return  # held while a Pod still uses them: gone by a later pass
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                meta["name"], shelf)

    def keep(shelf: dict[str, Any]) -> None:
        meta = shelf["metadata"]
        if FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FINALIZER]
            shelf = custom.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                            meta["name"], shelf)
        try:
            apps.create_namespaced_stateful_set(namespace, statefulset(shelf))
        except kubernetes.client.ApiException as error:
            if error.status != 409:
                raise
        count = len(claims(f"shelf={meta['name']}"))
        if (shelf.get("status") or {}).get("claims") != count:
            custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, PLURAL, meta["name"], {"status": {"claims": count}})

    while True:
        for shelf in custom.list_namespaced_custom_object(GROUP, VERSION, namespace,
                                                          PLURAL)["items"]:
            try:
                if shelf["metadata"].get("deletionTimestamp"):
                    if FINALIZER in (shelf["metadata"].get("finalizers") or []):
                        release(shelf)
                else:
                    keep(shelf)
            except kubernetes.client.ApiException as error:
                if error.status not in (404, 409):  # gone, or a newer one: next pass
                    raise
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    arguments = parser.parse_args()
    main(arguments.kubeconfig, arguments.namespace)
