"""Writing a custom resource's status the way every controller here does it."""

from __future__ import annotations

import copy

from ..runtime import Conflict, KubeClient
from ..runtime.client import Resource
from ..runtime.store import Store
from .common import Obj, meta


def replace_status(kube: KubeClient, store: Store, resource: Resource, obj: Obj,
                   status: Obj) -> Obj:
    """PUT ``status`` on ``obj`` (like Status().Update()) and cache what the server stored.

    On a conflict the live object goes into the cache and the Conflict propagates, so the
    reconcile reruns on fresh data instead of overwriting someone else's newer status.
    """
    namespace, name = meta(obj)["namespace"], meta(obj)["name"]
    body = copy.deepcopy(obj)
    body["status"] = status
    try:
        written = kube.replace_status(resource, namespace, name, body)
    except Conflict:
        store.upsert(kube.get(resource, namespace, name))
        raise
    store.upsert(written)
    return written
