"""The RayService reconcile: clusters, then Serve, then Kubernetes Services, in that order.

Each step has a module of its own (``clusters``, ``serve``, ``services``) and all status goes
through ``status.StatusWriter``; this module only orders them and decides when a reconcile ends.
The seed's change is the head-Pod gate in ``serve``.

``serve_gate="none"`` reproduces the controller before that change, write for write: no head Pod
check, every failed Dashboard step written to status (``updateState``: a fresh
``dashboardStatus.lastUpdateTime`` each time) and every "healthy but not ready" pass written too.
With the gate, status is written only when something other than timestamps changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from ...constants import RAY_GROUP
from ...resources import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES
from ...runtime import ApiError, Conflict, History, KeyLogger, Result
from ...runtime.mapping import owned_handler, primary_handler
from ...runtime.objects import Obj, is_deleting, meta
from ..context import Context
from ..statusdiff import status_changed
from .clusters import ClusterStep
from .serve import GateSkip, ServeStep
from .services import ServicesStep
from .status import FAILED_TO_GET_OR_CREATE_CLUSTER, FAILED_TO_UPDATE_SERVICE, StatusWriter


class RayServiceController:
    name = "rayservice"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.rayservices = ctx.informers.informer(RAYSERVICES)
        self.clusters = ctx.informers.informer(RAYCLUSTERS)
        self.services = ctx.informers.informer(SERVICES)
        self.pods = ctx.informers.informer(PODS)
        """Read (never a trigger) by the head-Pod gate and the serve-endpoint count."""
        legacy = ctx.config.serve_gate == "none"
        self._status = StatusWriter(ctx, self.rayservices, self.pods, legacy=legacy)
        self._cluster_step = ClusterStep(ctx, self.clusters)
        self._serve_step = ServeStep(ctx, self.services, self.pods, self._status, legacy=legacy)
        self._services_step = ServicesStep(ctx, self.clusters, self.services)

    @property
    def gate_skips(self) -> History[GateSkip]:
        """Reconciles that stopped at the head-Pod gate, one ``GateSkip`` each (the last
        ``HISTORY_LIMIT``; ``.total`` counts all). Always empty with ``serve_gate="none"``."""
        return self._serve_step.gate.skips

    def register(self, enqueue: Callable[[str], None]) -> None:
        # No handler on Pods, as in KubeRay (its RayService controller watches RayServices and the
        # RayClusters and Services they own). The Pod informer still runs: its cache is what the
        # head-Pod gate and the serve-endpoint count read. A reconcile the gate stopped requeues
        # itself service_requeue_seconds later (2 s by default), so the gate is re-checked on that
        # period; a head Pod turning Ready also wakes the RayService sooner when the RayCluster
        # controller writes the cluster's status in response (the RayCluster handler below).
        self.rayservices.add_handler(primary_handler(enqueue))
        self.clusters.add_handler(owned_handler(enqueue, "RayService", RAY_GROUP))
        self.services.add_handler(owned_handler(enqueue, "RayService", RAY_GROUP))

    def reconcile(self, key: str, log: KeyLogger) -> Result | None:
        svc = self.rayservices.store.get(key)
        if svc is None:
            self._serve_step.forget(key)
            self._cluster_step.forget(key)
            return None
        if is_deleting(svc):
            return None
        requeue = self.ctx.config.service_requeue_seconds
        old_status: Obj = svc.get("status") or {}
        status = copy.deepcopy(old_status)
        status["observedGeneration"] = meta(svc).get("generation")

        self._serve_step.forget_other_clusters(key, status)
        next_deletion = self._cluster_step.clean_up_stale(key, svc, status, log)
        if next_deletion is not None:
            requeue = min(requeue, max(next_deletion, 0.1))

        try:
            clusters = self._cluster_step.reconcile(svc, status, log)
        except Conflict:
            raise
        except ApiError as exc:
            return self._status.update_state(
                svc, old_status, status, FAILED_TO_GET_OR_CREATE_CLUSTER, str(exc), log
            )
        if clusters.prepared:
            self._status.write(svc, status, log, "prepare a new RayCluster")
            return Result(requeue)

        served, is_active = (
            (clusters.pending, False) if clusters.pending is not None else (clusters.active, True)
        )
        assert served is not None, "without a cluster, ClusterStep.reconcile prepares one"
        outcome = self._serve_step.reconcile(svc, old_status, status, served, is_active, log)
        if outcome is not None:
            return outcome

        try:
            self._services_step.reconcile(svc, status, log)
        except Conflict:
            raise
        except ApiError as exc:
            return self._status.update_state(
                svc, old_status, status, FAILED_TO_UPDATE_SERVICE, str(exc), log
            )

        self._status.refresh_derived(svc, status)
        if status_changed(old_status, status):
            # An earlier write in this reconcile ("isHealthy && !isReady" without the gate) moved
            # the resourceVersion on and put the written object in the cache: write over it
            # rather than into a conflict with our own write.
            latest = self.rayservices.store.get(key) or svc
            self._status.write(latest, status, log, "end of reconcile")
        return Result(requeue)
