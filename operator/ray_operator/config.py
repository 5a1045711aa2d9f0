"""Operator settings. Defaults are KubeRay's."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from .dashboard import DashboardResolver, default_dashboard_resolver

ServeGate = Literal["head-pod", "none"]
SERVE_GATES: tuple[str, ...] = ("head-pod", "none")
CONTROLLERS: tuple[str, ...] = ("raycluster", "rayservice", "rayjob")
"""The names of the controllers there are, in start order (all run by default).

Plain data, so that the settings need none of the controllers (which read the settings):
``controllers.registry`` has a class for each name and refuses to load if the two differ."""
DEFAULT_REQUEUE_ENV = "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV"


def _default_requeue_seconds() -> float:
    """KubeRay reads its RayCluster requeue period from this environment variable too."""
    raw = os.environ.get(DEFAULT_REQUEUE_ENV, "")
    try:
        return float(raw) if raw else 300.0
    except ValueError:
        return 300.0


@dataclass
class OperatorConfig:
    namespace: str | None = None
    """Namespace to watch; None watches all namespaces."""

    serve_gate: ServeGate = "head-pod"
    """``head-pod``: no Dashboard call and no status write until the served cluster's head Pod is
    Running and Ready (KubeRay after the seed change). ``none``: the behaviour before it: Dashboard
    calls regardless, every failed call and every "healthy but not ready" pass writes status."""

    dashboard_resolver: DashboardResolver = default_dashboard_resolver
    service_requeue_seconds: float = 2.0
    service_restart_requeue_seconds: float = 10.0
    error_requeue_seconds: float = 2.0
    default_requeue_seconds: float = field(default_factory=_default_requeue_seconds)
    stale_cluster_delete_delay_seconds: float = 60.0
    job_requeue_seconds: float = 3.0
    unhealthy_threshold_seconds: float = 60.0
    """Default for ``serviceUnhealthySecondThreshold``/``deploymentUnhealthySecondThreshold``."""

    dashboard_timeout_seconds: float = 5.0
    workers: int = 1
    """Reconcile threads per controller (KubeRay's default concurrency is 1)."""

    controllers: tuple[str, ...] = CONTROLLERS
    watch_timeout_seconds: int = 5
    """Server-side watch timeout, kept short so a watch thread exits promptly even if interrupting
    its socket on shutdown failed; the informer resumes from the last resourceVersion each time."""

    cache_sync_timeout_seconds: float = 60.0
    """Give up (fatal error) when the caches have not synced by then, e.g. CRDs not installed."""

    backoff_base_seconds: float = 0.05
    backoff_max_seconds: float = 60.0
    shutdown_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.serve_gate not in SERVE_GATES:
            raise ValueError(f"serve_gate must be one of {SERVE_GATES}, not {self.serve_gate!r}")
        unknown = set(self.controllers) - set(CONTROLLERS)
        if unknown:
            raise ValueError(f"unknown controllers {sorted(unknown)}; known: {CONTROLLERS}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
