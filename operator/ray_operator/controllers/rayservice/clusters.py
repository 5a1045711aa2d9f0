"""The RayClusters of a RayService: which ones it runs, creating them, scaling edits, clean-up.

Status names at most two clusters: the active one (serving) and the pending one (being brought
up to replace it). A spec change, or a Serve failure beyond its threshold, names a new pending
cluster; clusters that are neither are deleted a grace delay after they were first seen so.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...constants import (
    ANNOTATION_CLUSTER_HASH,
    ANNOTATION_SERVICE_SCALING,
    CREATED_BY_RAYSERVICE,
    LABEL_CREATED_BY,
    LABEL_SERVICE,
    RAY_API_VERSION,
)
from ...resources import RAYCLUSTERS
from ...runtime import Informer, KeyLogger, NotFound
from ...runtime.objects import Obj, annotations_of, is_deleting, labels_of, meta
from ...runtime.retry import update_with_retry
from ..common import owner_reference
from ..context import Context
from ..hashing import cluster_hash, scaling_fields
from ..writes import create_ray_cluster
from .status import ACTIVE, PENDING, cluster_name, mark_restart

_SKIPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


@dataclass(frozen=True)
class Clusters:
    """The clusters a reconcile goes on with."""

    active: Obj | None
    pending: Obj | None
    prepared: bool
    """A new pending cluster was just named; status must be persisted before creating it."""


class ClusterStep:
    """The first step of a reconcile: make the clusters status names exist and match the spec."""

    def __init__(self, ctx: Context, clusters: Informer) -> None:
        self.ctx = ctx
        self.clusters = clusters
        self._lock = threading.Lock()
        # Like KubeRay, in memory only: when each stale cluster of each RayService is due for
        # deletion (an operator restart starts the grace delay over, erring on keeping them).
        self._deletion_due: dict[str, dict[str, float]] = {}

    def forget(self, key: str) -> None:
        """The RayService is gone: drop what was remembered about its clusters."""
        with self._lock:
            self._deletion_due.pop(key, None)

    def reconcile(self, svc: Obj, status: Obj, log: KeyLogger) -> Clusters:
        """Name a new pending cluster when needed, else create a named pending cluster that does
        not exist yet and copy scaling edits to both clusters."""
        namespace, name = meta(svc)["namespace"], meta(svc)["name"]
        config = (svc.get("spec") or {}).get("rayClusterConfig") or {}
        goal = cluster_hash(config)
        active_name, pending_name = cluster_name(status, ACTIVE), cluster_name(status, PENDING)
        active = self.clusters.store.get(f"{namespace}/{active_name}") if active_name else None
        pending = self.clusters.store.get(f"{namespace}/{pending_name}") if pending_name else None

        why = ""
        if not pending_name:
            if active is None:
                why = "no active RayCluster"
            elif annotations_of(active).get(ANNOTATION_CLUSTER_HASH) != goal:
                why = f"spec.rayClusterConfig differs from RayCluster {active_name}"
        elif pending is not None and annotations_of(pending).get(ANNOTATION_CLUSTER_HASH) != goal:
            why = f"spec.rayClusterConfig changed again while RayCluster {pending_name} was pending"
        if why:
            new_name = mark_restart(status, name)
            log.info("preparing new RayCluster %s: %s", new_name, why)
            return Clusters(active, None, True)

        if pending_name and pending is None:
            pending = self._create(svc, pending_name, config, goal, log)
        for cluster in (active, pending):
            if cluster is not None:
                self._propagate_scaling(cluster, config, log)
        return Clusters(active, pending, False)

    def clean_up_stale(self, key: str, svc: Obj, status: Obj, log: KeyLogger) -> float | None:
        """Delete clusters of this RayService that are neither active nor pending, a delay after
        they were first seen so; returns seconds until the next such deletion, if any."""
        namespace, name = meta(svc)["namespace"], meta(svc)["name"]
        keep = {cluster_name(status, ACTIVE), cluster_name(status, PENDING)}
        now = time.monotonic()
        delay = self.ctx.config.stale_cluster_delete_delay_seconds
        with self._lock:
            due = self._deletion_due.setdefault(key, {})
        seen: set[str] = set()
        for cluster in self.clusters.store.select(namespace, {LABEL_SERVICE: name}):
            stale = meta(cluster)["name"]
            if stale in keep or is_deleting(cluster):
                continue
            seen.add(stale)
            if stale not in due:
                due[stale] = now + delay
                log.info("RayCluster %s is stale; deleting it in %.0fs", stale, delay)
            if now < due[stale]:
                continue
            try:
                self.ctx.kube.delete(RAYCLUSTERS, namespace, stale, propagation_policy="Background")
            except NotFound:
                pass
            else:
                log.info("deleted stale RayCluster %s", stale)
                self.ctx.recorder.normal(svc, "Deleted", f"Deleted stale RayCluster {stale}")
            seen.discard(stale)
        for forgotten in set(due) - seen:
            del due[forgotten]
        return min((t - now for t in due.values()), default=None)

    def _create(self, svc: Obj, name: str, config: Obj, goal_hash: str, log: KeyLogger) -> Obj:
        namespace = meta(svc)["namespace"]
        cluster_annotations = {
            k: v for k, v in annotations_of(svc).items() if k not in _SKIPPED_ANNOTATIONS
        }
        cluster_annotations[ANNOTATION_CLUSTER_HASH] = goal_hash
        cluster_annotations[ANNOTATION_SERVICE_SCALING] = _scaling_json(scaling_fields(config))
        body = {
            "apiVersion": RAY_API_VERSION,
            "kind": "RayCluster",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {
                    **labels_of(svc),
                    LABEL_SERVICE: meta(svc)["name"],
                    LABEL_CREATED_BY: CREATED_BY_RAYSERVICE,
                },
                "annotations": cluster_annotations,
                "ownerReferences": [owner_reference(svc)],
            },
            "spec": copy.deepcopy(config),
        }
        return create_ray_cluster(self.ctx, self.clusters.store, svc, body, log)

    def _propagate_scaling(self, cluster: Obj, config: Obj, log: KeyLogger) -> None:
        """Copy edits of worker replicas/workersToDelete made in the RayService to its cluster.

        The annotation remembers what was last copied, so only fields the RayService changed
        since are written: the autoscaler's own edits of the cluster are left alone.
        """
        desired = scaling_fields(config)
        if _parse_scaling(annotations_of(cluster).get(ANNOTATION_SERVICE_SCALING)) == desired:
            return

        def mutate(obj: Obj) -> bool:
            applied = _parse_scaling(annotations_of(obj).get(ANNOTATION_SERVICE_SCALING))
            if applied == desired:
                return False
            for group in (obj.get("spec") or {}).get("workerGroupSpecs") or []:
                want = desired.get(str(group.get("groupName")))
                before = (applied or {}).get(str(group.get("groupName")))
                if want is None:
                    continue
                if before is None or before.get("replicas") != want["replicas"]:
                    if want["replicas"] is None:
                        group.pop("replicas", None)
                    else:
                        group["replicas"] = want["replicas"]
                if before is None or before.get("workersToDelete") != want["workersToDelete"]:
                    group.setdefault("scaleStrategy", {})["workersToDelete"] = want[
                        "workersToDelete"
                    ]
            obj["metadata"].setdefault("annotations", {})[ANNOTATION_SERVICE_SCALING] = (
                _scaling_json(desired)
            )
            return True

        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        written = update_with_retry(
            self.ctx.kube, RAYCLUSTERS, namespace, name, mutate, current=cluster
        )
        if written is not None:
            self.clusters.store.upsert(written)
            log.info("copied worker replicas/workersToDelete to RayCluster %s", name)


def _scaling_json(fields: dict[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def _parse_scaling(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
