"""RayService status vocabulary and the edits the controller makes to it (pure functions)."""

from __future__ import annotations

from typing import Any

from .common import random_suffix

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

Status = dict[str, Any]


def cluster_name(status: Status, which: str) -> str:
    return str((status.get(which) or {}).get("rayClusterName") or "")


def mark_restart(status: Status, service_name: str) -> str:
    """Ask for a new cluster: status Restarting and a fresh pending name (KubeRay's markRestart)."""
    name = f"{service_name}-raycluster-{random_suffix()}"
    status["serviceStatus"] = RESTARTING
    status[PENDING] = {"rayClusterName": name}
    return name


def promote(status: Status) -> None:
    status[ACTIVE] = status.get(PENDING) or {}
    status[PENDING] = {}


def set_dashboard_health(cluster_status: Status, healthy: bool, now: str) -> None:
    dashboard = cluster_status.setdefault("dashboardStatus", {})
    dashboard["isHealthy"] = healthy
    dashboard["lastUpdateTime"] = now
    if healthy or not dashboard.get("healthLastUpdateTime"):
        dashboard["healthLastUpdateTime"] = now


def _find(conditions: list[Status], kind: str) -> Status | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def set_condition(
    conditions: list[Status],
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


def update_conditions(
    status: Status, generation: int | None, serve_endpoints: int, now: str
) -> None:
    conditions: list[Status] = status.setdefault("conditions", [])
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
