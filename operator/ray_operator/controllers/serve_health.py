"""Serve health and readiness from the Dashboard's application statuses (a pure function).

Not RUNNING/HEALTHY means not ready. An application DEPLOY_FAILED/UNHEALTHY, or a deployment
UNHEALTHY, for longer than its threshold means not healthy, which makes the RayService prepare
a new cluster. "For longer" is measured from ``healthLastUpdateTime``, which is refreshed on
every observation except a repeated unhealthy one, so it marks when the unhealthiness began.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..dashboard import AppStatus
from ..runtime.timeutil import format_rfc3339, seconds_since

APP_RUNNING = "RUNNING"
APP_UNHEALTHY_STATES = frozenset({"DEPLOY_FAILED", "UNHEALTHY"})
DEPLOYMENT_HEALTHY = "HEALTHY"
DEPLOYMENT_UNHEALTHY = "UNHEALTHY"


@dataclass(frozen=True)
class ServeHealth:
    applications: dict[str, Any]
    """The ``applicationStatuses`` to put in status."""
    healthy: bool
    ready: bool


def _since_unhealthy(previous: dict[str, Any], current_status: str, now_text: str) -> str:
    if previous.get("status") == current_status and previous.get("healthLastUpdateTime"):
        return str(previous["healthLastUpdateTime"])
    return now_text


def evaluate_serve(
    apps: dict[str, AppStatus],
    previous: dict[str, Any],
    *,
    now: datetime,
    app_threshold_seconds: float,
    deployment_threshold_seconds: float,
) -> ServeHealth:
    now_text = format_rfc3339(now)
    healthy, ready = True, bool(apps)
    result: dict[str, Any] = {}
    for app_name, app in sorted(apps.items()):
        prev_app = previous.get(app_name) or {}
        app_entry: dict[str, Any] = {
            "status": app.status,
            "message": app.message,
            "lastUpdateTime": now_text,
            "healthLastUpdateTime": now_text,
            "serveDeploymentStatuses": {},
        }
        if app.status != APP_RUNNING:
            ready = False
        if app.status in APP_UNHEALTHY_STATES:
            since = _since_unhealthy(prev_app, app.status, now_text)
            app_entry["healthLastUpdateTime"] = since
            if (seconds_since(since, now) or 0.0) > app_threshold_seconds:
                healthy = False
        prev_deployments = prev_app.get("serveDeploymentStatuses") or {}
        for dep_name, dep in sorted(app.deployments.items()):
            dep_entry = {
                "status": dep.status,
                "message": dep.message,
                "lastUpdateTime": now_text,
                "healthLastUpdateTime": now_text,
            }
            if dep.status != DEPLOYMENT_HEALTHY:
                ready = False
            if dep.status == DEPLOYMENT_UNHEALTHY:
                since = _since_unhealthy(prev_deployments.get(dep_name) or {}, dep.status, now_text)
                dep_entry["healthLastUpdateTime"] = since
                if (seconds_since(since, now) or 0.0) > deployment_threshold_seconds:
                    healthy = False
            app_entry["serveDeploymentStatuses"][dep_name] = dep_entry
        result[app_name] = app_entry
    return ServeHealth(result, healthy, ready and healthy)
