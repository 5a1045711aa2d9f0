"""Writes every controller here makes the same way: status updates and owned RayClusters."""

from __future__ import annotations

import copy

from ..resources import RAYCLUSTERS
from ..runtime import AlreadyExists, Conflict, KeyLogger, KubeClient
from ..runtime.client import Resource
from ..runtime.objects import Obj, meta
from ..runtime.store import Store
from .context import Context


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


def create_ray_cluster(ctx: Context, store: Store, owner: Obj, body: Obj, log: KeyLogger) -> Obj:
    """Create an owned RayCluster (or take the one a previous reconcile created), record an
    event on its owner, and cache it so the next reconcile sees it before the watch does."""
    namespace, name = meta(body)["namespace"], meta(body)["name"]
    try:
        cluster = ctx.kube.create(RAYCLUSTERS, namespace, body)
    except AlreadyExists:
        cluster = ctx.kube.get(RAYCLUSTERS, namespace, name)
    else:
        log.info("created RayCluster %s", name)
        ctx.recorder.normal(owner, "Created", f"Created RayCluster {name}")
    store.upsert(cluster)
    return cluster
