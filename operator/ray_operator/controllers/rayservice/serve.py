"""Serve on the served cluster through its Dashboard, behind the seed's head-Pod gate.

The served cluster is the pending one if any, else the active one. With the gate
(``serve_gate="head-pod"``) no Dashboard call is made until that cluster has exactly one head
Pod, Running with Ready=True; until then the reconcile requeues writing nothing and calling
nothing, and each such stop is kept as a ``GateSkip``. Then the Serve config is submitted (once
per config and cluster), the applications' health is read and judged, and a ready pending cluster
is promoted to active.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import yaml

from ...constants import LABEL_CLUSTER, LABEL_NODE_TYPE, NODE_HEAD
from ...dashboard import AppStatus, DashboardClient, DashboardError
from ...runtime import History, Informer, KeyLogger, Result
from ...runtime.objects import Obj, meta, object_key
from ...runtime.timeutil import format_rfc3339, now_rfc3339
from ..common import pod_phase, pod_running_and_ready
from ..context import Context
from ..podbuilder import head_service_name
from ..serve_health import evaluate_serve
from .status import (
    ACTIVE,
    FAILED_TO_GET_SERVE_DEPLOYMENT_STATUS,
    PENDING,
    RUNNING,
    WAIT_FOR_DASHBOARD,
    WAIT_FOR_SERVE_DEPLOYMENT_READY,
    StatusWriter,
    cluster_name,
    mark_restart,
    promote,
    set_dashboard_health,
)

GateReason = Literal["no-head-pod", "many-head-pods", "not-ready"]


@dataclass(frozen=True)
class GateSkip:
    """One reconcile that stopped at the head-Pod gate: no Dashboard call, no status write."""

    key: str
    """The RayService, ``namespace/name``."""
    cluster: str
    """The served RayCluster (pending if any, else active)."""
    reason: GateReason
    """``no-head-pod`` (not created yet), ``many-head-pods`` (more than one: also a Warning
    event), or ``not-ready`` (one head Pod, not both Running and Ready)."""
    head_pod: str
    """The head Pod's name when there is exactly one, else ``""``."""
    phase: str
    """That Pod's ``status.phase`` (``""`` when unset or when there is not exactly one)."""
    monotonic: float
    """``time.monotonic()`` when the gate held."""


class HeadPodGate:
    """The seed's gate: exactly one head Pod, Running, with condition Ready=True.

    It reads the shared Pod informer's cache. Pod events do not trigger the RayService (see
    ``RayServiceController.register``): a closed gate is re-checked when the reconcile it ended
    requeues, ``service_requeue_seconds`` later.
    """

    def __init__(self, ctx: Context, pods: Informer) -> None:
        self.ctx = ctx
        self.pods = pods
        self.skips: History[GateSkip] = History()
        """The last ``HISTORY_LIMIT`` times the gate held."""

    def is_open(self, svc: Obj, cluster: Obj, log: KeyLogger) -> bool:
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        heads = self.pods.store.select(namespace, {LABEL_CLUSTER: name, LABEL_NODE_TYPE: NODE_HEAD})
        if len(heads) != 1:
            message = f"found {len(heads)} head Pods for RayCluster {name}, expected 1"
            if heads:
                log.error("%s; not calling the Dashboard", message)
                self.ctx.recorder.warning(svc, "InvalidHeadPodCount", message)
                self._skip(svc, name, "many-head-pods")
            else:
                log.info("%s (not created yet); not calling the Dashboard", message)
                self._skip(svc, name, "no-head-pod")
            return False
        head = heads[0]
        if not pod_running_and_ready(head):
            log.info(
                "head Pod %s is not Running and Ready (phase %s); skipping the Dashboard",
                meta(head)["name"],
                pod_phase(head) or "-",
            )
            self._skip(svc, name, "not-ready", meta(head)["name"], pod_phase(head))
            return False
        return True

    def _skip(
        self, svc: Obj, cluster: str, reason: GateReason, head_pod: str = "", phase: str = ""
    ) -> None:
        """Recorded after the log line, like ``Controller.retries``."""
        self.skips.append(
            GateSkip(object_key(svc), cluster, reason, head_pod, phase, time.monotonic())
        )


class ServeStep:
    """The second step of a reconcile: Serve on the served cluster, ending in promotion."""

    def __init__(
        self,
        ctx: Context,
        services: Informer,
        pods: Informer,
        status: StatusWriter,
        *,
        legacy: bool,
    ) -> None:
        self.ctx = ctx
        self.services = services
        self.status = status
        self.gate = HeadPodGate(ctx, pods)
        self.legacy = legacy
        """``serve_gate="none"``: no gate, and every "healthy but not ready" pass is written."""
        self._lock = threading.Lock()
        # Like KubeRay, in memory only: the Serve config last submitted to each cluster of each
        # RayService (after an operator restart it is submitted once more; an unchanged config
        # leaves the applications as they are).
        self._submitted: dict[str, dict[str, str]] = {}

    def forget(self, key: str) -> None:
        """The RayService is gone: drop the configs remembered for its clusters."""
        with self._lock:
            self._submitted.pop(key, None)

    def forget_other_clusters(self, key: str, status: Obj) -> None:
        """Drop the configs remembered for clusters no longer active nor pending."""
        keep = {cluster_name(status, ACTIVE), cluster_name(status, PENDING)}
        with self._lock:
            submitted = self._submitted.get(key) or {}
            for name in set(submitted) - keep:
                del submitted[name]

    def reconcile(
        self,
        svc: Obj,
        old_status: Obj,
        status: Obj,
        cluster: Obj,
        is_active: bool,
        log: KeyLogger,
    ) -> Result | None:
        """Returns a Result to end the reconcile with, or None to go on (Serve healthy)."""
        key = object_key(svc)
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        served = status.setdefault(ACTIVE if is_active else PENDING, {})
        served["rayClusterName"] = name
        served["rayClusterStatus"] = cluster.get("status") or {}

        def failed(service_status: str, message: str) -> Result:
            return self.status.update_state(
                svc, old_status, status, service_status, message, log
            )

        if not self.legacy and not self.gate.is_open(svc, cluster, log):
            return Result(self.ctx.config.service_requeue_seconds)

        head_service = head_service_name(name)
        if self.services.store.get(f"{namespace}/{head_service}") is None:
            return failed(WAIT_FOR_DASHBOARD, f'Service "{head_service}" not found')
        try:
            url = self.ctx.config.dashboard_resolver(namespace, name, head_service)
        except Exception as exc:
            set_dashboard_health(served, False, now_rfc3339())
            return failed(WAIT_FOR_DASHBOARD, f"no Dashboard address for {name}: {exc}")
        client = DashboardClient(url, self.ctx.http)

        config_text = str((svc.get("spec") or {}).get("serveConfigV2") or "")
        with self._lock:
            last_submitted = self._submitted.get(key, {}).get(name)
        if last_submitted != config_text:
            try:
                client.update_serve_applications(_serve_config(config_text))
            except (DashboardError, yaml.YAMLError, ValueError) as exc:
                set_dashboard_health(served, False, now_rfc3339())
                return failed(
                    WAIT_FOR_SERVE_DEPLOYMENT_READY, f"failed to submit the Serve config: {exc}"
                )
            with self._lock:
                self._submitted.setdefault(key, {})[name] = config_text
            log.info("submitted the Serve config to RayCluster %s at %s", name, url)
            self.ctx.recorder.normal(
                svc,
                "SubmittedServeDeployment",
                f"Controller sent API request to update Serve deployments on cluster {name}",
            )

        try:
            apps = client.get_serve_applications()
        except DashboardError as exc:
            set_dashboard_health(served, False, now_rfc3339())
            return failed(
                FAILED_TO_GET_SERVE_DEPLOYMENT_STATUS, f"failed to get Serve status: {exc}"
            )
        return self._judge(svc, status, served, name, is_active, apps, log)

    def _judge(
        self,
        svc: Obj,
        status: Obj,
        served: Obj,
        name: str,
        is_active: bool,
        apps: dict[str, AppStatus],
        log: KeyLogger,
    ) -> Result | None:
        """Serve answered: promote when ready, restart on a new cluster when unhealthy beyond the
        threshold, else wait for it."""
        now = datetime.now(UTC)
        set_dashboard_health(served, True, format_rfc3339(now))
        health = evaluate_serve(
            apps,
            served.get("applicationStatuses") or {},
            now=now,
            app_threshold_seconds=self._threshold(svc, "serviceUnhealthySecondThreshold"),
            deployment_threshold_seconds=self._threshold(svc, "deploymentUnhealthySecondThreshold"),
        )
        served["applicationStatuses"] = health.applications
        log.debug(
            "Serve on %s: healthy=%s ready=%s active=%s",
            name,
            health.healthy,
            health.ready,
            is_active,
        )

        if health.ready:
            if status.get("serviceStatus") != RUNNING or not is_active:
                self.ctx.recorder.normal(
                    svc, "Running", "The Serve application is now running and healthy."
                )
            status["serviceStatus"] = RUNNING
            if not is_active:
                promote(status)
                log.info("promoted RayCluster %s from pending to active", name)
            return None
        if not health.healthy:
            restart_after = self.ctx.config.service_restart_requeue_seconds
            new_name = mark_restart(status, meta(svc)["name"])
            # The event before the status write, as KubeRay does (its status is written at the
            # end of the reconcile): killed between the two, a fresh instance finds the status
            # unchanged and says it again; the other way round the event was lost for good.
            self.ctx.recorder.normal(
                svc,
                "Restarting",
                f"The cluster will restart after {restart_after:.0f}s",
            )
            self.status.write(svc, status, log, f"Serve on {name} unhealthy beyond the threshold")
            log.info("Serve on RayCluster %s unhealthy; preparing RayCluster %s", name, new_name)
            return Result(restart_after)
        status["serviceStatus"] = WAIT_FOR_SERVE_DEPLOYMENT_READY
        if self.legacy:
            self.status.write(svc, status, log, "isHealthy && !isReady")
        return None

    def _threshold(self, svc: Obj, field: str) -> float:
        value = (svc.get("spec") or {}).get(field)
        return float(value) if value is not None else self.ctx.config.unhealthy_threshold_seconds


def _serve_config(text: str) -> dict[str, Any]:
    """serveConfigV2 is YAML in the spec; the Dashboard takes the same document as JSON."""
    config = yaml.safe_load(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError("serveConfigV2 is not a YAML mapping")
    return config
