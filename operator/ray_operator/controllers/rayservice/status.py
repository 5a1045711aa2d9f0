"""RayService status: its vocabulary, the edits a reconcile makes to it, and the one writer.

The edits are pure functions of a status dict (unit-tested alone). ``StatusWriter`` is the only
code that sends a RayService status to the API server; it fills in the derived fields (serve
endpoint count, conditions) before every write, so no write can carry stale ones.
"""

from __future__ import annotations

from ...constants import LABEL_CLUSTER, LABEL_SERVE
from ...resources import RAYSERVICES
from ...runtime import Informer, KeyLogger, Result
from ...runtime.objects import Obj, is_deleting, meta
from ...runtime.timeutil import now_rfc3339
from ..common import pod_running_and_ready, random_suffix
from ..context import Context
from ..statusdiff import status_changed
from ..writes import replace_status

# serviceStatus values (KubeRay).
FAILED_TO_GET_OR_CREATE_CLUSTER = "FailedToGetOrCreateRayCluster"
WAIT_FOR_DASHBOARD = "WaitForDashboard"
WAIT_FOR_SERVE_DEPLOYMENT_READY = "WaitForServeDeploymentReady"
FAILED_TO_GET_SERVE_DEPLOYMENT_STATUS = "FailedToGetServeDeploymentStatus"
RUNNING = "Running"
RESTARTING = "Restarting"
FAILED_TO_UPDATE_SERVICE = "FailedToUpdateService"

ACTIVE = "activeServiceStatus"
PENDING = "pendingServiceStatus"

# Conditions (KubeRay v1.3).
COND_READY = "Ready"
COND_UPGRADE_IN_PROGRESS = "UpgradeInProgress"
REASON_INITIALIZING = "Initializing"
REASON_NON_ZERO_ENDPOINTS = "NonZeroServeEndpoints"
REASON_ZERO_ENDPOINTS = "ZeroServeEndpoints"
REASON_BOTH_CLUSTERS = "BothActivePendingClustersExist"
REASON_NO_PENDING = "NoPendingCluster"
REASON_NO_ACTIVE = "NoActiveCluster"


# ------------------------------------------------------------------------------ pure edits


def cluster_name(status: Obj, which: str) -> str:
    return str((status.get(which) or {}).get("rayClusterName") or "")


def mark_restart(status: Obj, service_name: str) -> str:
    """Ask for a new cluster: status Restarting and a fresh pending name (KubeRay's markRestart)."""
    name = f"{service_name}-raycluster-{random_suffix()}"
    status["serviceStatus"] = RESTARTING
    status[PENDING] = {"rayClusterName": name}
    return name


def promote(status: Obj) -> None:
    status[ACTIVE] = status.get(PENDING) or {}
    status[PENDING] = {}


def set_dashboard_health(cluster_status: Obj, healthy: bool, now: str) -> None:
    dashboard = cluster_status.setdefault("dashboardStatus", {})
    dashboard["isHealthy"] = healthy
    dashboard["lastUpdateTime"] = now
    if healthy or not dashboard.get("healthLastUpdateTime"):
        dashboard["healthLastUpdateTime"] = now


def _find(conditions: list[Obj], kind: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def set_condition(
    conditions: list[Obj],
    kind: str,
    value: str,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> None:
    """Like apimachinery's SetStatusCondition: lastTransitionTime moves only with the value."""
    current = _find(conditions, kind)
    if current is None:
        current = {"type": kind, "lastTransitionTime": now}
        conditions.append(current)
    elif current.get("status") != value:
        current["lastTransitionTime"] = now
    current.update(status=value, reason=reason, message=message)
    if generation is not None:
        current["observedGeneration"] = generation


def update_conditions(status: Obj, generation: int | None, serve_endpoints: int, now: str) -> None:
    conditions: list[Obj] = status.setdefault("conditions", [])
    if not conditions:
        message = "RayService is initializing"
        for kind in (COND_READY, COND_UPGRADE_IN_PROGRESS):
            set_condition(conditions, kind, "False", REASON_INITIALIZING, message, generation, now)
    ready = _find(conditions, COND_READY)
    if serve_endpoints > 0:
        set_condition(
            conditions,
            COND_READY,
            "True",
            REASON_NON_ZERO_ENDPOINTS,
            "Number of serve endpoints is greater than 0",
            generation,
            now,
        )
    elif ready is not None and ready.get("status") == "True":
        set_condition(
            conditions,
            COND_READY,
            "False",
            REASON_ZERO_ENDPOINTS,
            "Number of serve endpoints dropped to 0",
            generation,
            now,
        )
    active, pending = cluster_name(status, ACTIVE), cluster_name(status, PENDING)
    if active and pending:
        set_condition(
            conditions,
            COND_UPGRADE_IN_PROGRESS,
            "True",
            REASON_BOTH_CLUSTERS,
            "Both active and pending Ray clusters exist",
            generation,
            now,
        )
    elif active:
        set_condition(
            conditions,
            COND_UPGRADE_IN_PROGRESS,
            "False",
            REASON_NO_PENDING,
            "Active Ray cluster exists and no pending Ray cluster",
            generation,
            now,
        )
    else:
        upgrade = _find(conditions, COND_UPGRADE_IN_PROGRESS)
        if upgrade is None or upgrade.get("reason") != REASON_INITIALIZING:
            set_condition(
                conditions,
                COND_UPGRADE_IN_PROGRESS,
                "Unknown",
                REASON_NO_ACTIVE,
                "No active Ray cluster exists, and the RayService is not initializing",
                generation,
                now,
            )


# ---------------------------------------------------------------------------------- writes


class StatusWriter:
    """Writes RayService status, and decides when a failed step is worth a write.

    ``legacy`` (``serve_gate="none"``) reproduces the controller before the seed's change: every
    failed step is written (a fresh ``dashboardStatus.lastUpdateTime`` each time). Otherwise a
    failed step is written only when something other than timestamps changed.
    """

    def __init__(
        self, ctx: Context, rayservices: Informer, pods: Informer, *, legacy: bool
    ) -> None:
        self.ctx = ctx
        self.rayservices = rayservices
        self.pods = pods
        self.legacy = legacy

    def write(self, svc: Obj, status: Obj, log: KeyLogger, reason: str) -> None:
        """The one place RayService status is written (PUT /status, like Status().Update()).

        On a conflict the live object goes into the cache and the Conflict propagates: the
        reconcile reruns on fresh data instead of overwriting a newer status.
        """
        self.refresh_derived(svc, status)
        replace_status(self.ctx.kube, self.rayservices.store, RAYSERVICES, svc,
                       {**status, "lastUpdateTime": now_rfc3339()})
        log.info(
            "status written (%s): serviceStatus=%s active=%s pending=%s",
            reason,
            status.get("serviceStatus"),
            cluster_name(status, ACTIVE) or "-",
            cluster_name(status, PENDING) or "-",
        )

    def update_state(
        self,
        svc: Obj,
        old_status: Obj,
        status: Obj,
        service_status: str,
        message: str,
        log: KeyLogger,
    ) -> Result:
        """A step failed: record it (KubeRay's ``updateState``) and end the reconcile."""
        status["serviceStatus"] = service_status
        log.info("%s: %s", service_status, message)
        self.refresh_derived(svc, status)
        if self.legacy or status_changed(old_status, status):
            self.write(svc, status, log, f"updateState {service_status}: {message}")
            self.ctx.recorder.normal(svc, service_status, message)
        return Result(self.ctx.config.service_requeue_seconds)

    def refresh_derived(self, svc: Obj, status: Obj) -> None:
        """Fields computed from others: serve endpoints of the active cluster and conditions."""
        endpoints = self._serve_endpoints(meta(svc)["namespace"], cluster_name(status, ACTIVE))
        status["numServeEndpoints"] = endpoints
        update_conditions(status, meta(svc).get("generation"), endpoints, now_rfc3339())

    def _serve_endpoints(self, namespace: str, active: str) -> int:
        """Ready Pods the serve Service selects, counted from the Pod cache (not from Endpoints
        objects), so the count does not depend on an endpoints controller running."""
        if not active:
            return 0
        pods = self.pods.store.select(namespace, {LABEL_CLUSTER: active, LABEL_SERVE: "true"})
        return sum(1 for p in pods if pod_running_and_ready(p) and not is_deleting(p))
