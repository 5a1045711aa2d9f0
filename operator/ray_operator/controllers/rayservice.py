"""RayService controller: clusters named in status, Serve through the Dashboard, promotion.

The seed's change lives in ``_head_pod_ready``: before any Dashboard call the served cluster (the
pending one if any, else the active one) must have exactly one head Pod, Running with Ready=True;
otherwise the reconcile requeues after 2 s writing nothing and calling nothing.

``serve_gate="none"`` reproduces the controller before that change, write for write: no head Pod
check, every failed Dashboard step written to status (``updateState``: a fresh
``dashboardStatus.lastUpdateTime`` each time) and every "healthy but not ready" pass written too.
With the gate, status is written only when something other than timestamps changed.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from ..constants import (
    ANNOTATION_CLUSTER_HASH,
    ANNOTATION_SERVICE_SCALING,
    CREATED_BY_RAYSERVICE,
    LABEL_CLUSTER,
    LABEL_CREATED_BY,
    LABEL_NODE_TYPE,
    LABEL_SERVE,
    LABEL_SERVICE,
    NODE_HEAD,
    RAY_API_VERSION,
    RAY_GROUP,
    SERVE_PORT_NAME,
)
from ..dashboard import DashboardClient, DashboardError
from ..resources import PODS, RAYCLUSTERS, RAYSERVICES, SERVICES
from ..runtime import AlreadyExists, ApiError, Conflict, KeyLogger, NotFound, Result
from ..runtime.mapping import owned_handler, primary_handler
from ..runtime.retry import update_with_retry
from ..runtime.timeutil import format_rfc3339
from .common import (
    Obj,
    annotations_of,
    is_deleting,
    labels_of,
    meta,
    owner_reference,
    pod_phase,
    pod_running_and_ready,
)
from .context import Context
from .hashing import cluster_hash, scaling_fields
from .podbuilder import head_ports, head_service_name, service_ports
from .rayservice_status import (
    ACTIVE,
    FAILED_TO_GET_OR_CREATE_CLUSTER,
    FAILED_TO_GET_SERVE_DEPLOYMENT_STATUS,
    FAILED_TO_UPDATE_SERVICE,
    PENDING,
    RUNNING,
    WAIT_FOR_DASHBOARD,
    WAIT_FOR_SERVE_DEPLOYMENT_READY,
    cluster_name,
    mark_restart,
    promote,
    set_dashboard_health,
    update_conditions,
)
from .serve_health import evaluate_serve
from .statusdiff import status_changed
from .writes import create_ray_cluster, replace_status

_SKIPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


@dataclass(frozen=True)
class _Clusters:
    active: Obj | None
    pending: Obj | None
    prepared: bool
    """A new pending cluster was just named; status must be persisted before creating it."""


class RayServiceController:
    name = "rayservice"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.rayservices = ctx.informers.informer(RAYSERVICES)
        self.clusters = ctx.informers.informer(RAYCLUSTERS)
        self.services = ctx.informers.informer(SERVICES)
        self.pods = ctx.informers.informer(PODS)
        self._legacy = ctx.config.serve_gate == "none"
        self._lock = threading.Lock()
        # Like KubeRay, in memory only: the Serve config last submitted to each cluster of each
        # RayService, and when each stale cluster is due for deletion.
        self._submitted: dict[str, dict[str, str]] = {}
        self._deletion_due: dict[str, dict[str, float]] = {}

    def register(self, enqueue: Callable[[str], None]) -> None:
        # Pods are not watched, as in KubeRay: the head Pod gate is polled every 2 s.
        self.rayservices.add_handler(primary_handler(enqueue))
        self.clusters.add_handler(owned_handler(enqueue, "RayService", RAY_GROUP))
        self.services.add_handler(owned_handler(enqueue, "RayService", RAY_GROUP))

    # ----------------------------------------------------------------- reconcile

    def reconcile(self, key: str, log: KeyLogger) -> Result | None:
        svc = self.rayservices.store.get(key)
        if svc is None:
            with self._lock:
                self._submitted.pop(key, None)
                self._deletion_due.pop(key, None)
            return None
        if is_deleting(svc):
            return None
        requeue = self.ctx.config.service_requeue_seconds
        old_status: Obj = svc.get("status") or {}
        status = copy.deepcopy(old_status)
        status["observedGeneration"] = meta(svc).get("generation")

        self._forget_other_clusters(key, status)
        next_deletion = self._clean_up_stale_clusters(key, svc, status, log)
        if next_deletion is not None:
            requeue = min(requeue, max(next_deletion, 0.1))

        try:
            clusters = self._reconcile_clusters(svc, status, log)
        except Conflict:
            raise
        except ApiError as exc:
            return self._update_state(
                svc, old_status, status, FAILED_TO_GET_OR_CREATE_CLUSTER, str(exc), log
            )
        if clusters.prepared:
            self._write_status(svc, status, log, "prepare a new RayCluster")
            return Result(requeue)

        served, is_active = (
            (clusters.pending, False) if clusters.pending is not None else (clusters.active, True)
        )
        assert served is not None, "without a cluster, _reconcile_clusters prepares one"
        outcome = self._reconcile_serve(svc, old_status, status, served, is_active, log)
        if outcome is not None:
            return outcome

        try:
            self._reconcile_kubernetes_services(svc, status, log)
        except Conflict:
            raise
        except ApiError as exc:
            return self._update_state(
                svc, old_status, status, FAILED_TO_UPDATE_SERVICE, str(exc), log
            )

        self._refresh_derived(svc, status)
        if status_changed(old_status, status):
            # An earlier write in this reconcile ("isHealthy && !isReady" without the gate) moved
            # the resourceVersion on and put the written object in the cache: write over it
            # rather than into a conflict with our own write.
            latest = self.rayservices.store.get(key) or svc
            self._write_status(latest, status, log, "end of reconcile")
        return Result(requeue)

    # ------------------------------------------------------------ status writes

    def _write_status(self, svc: Obj, status: Obj, log: KeyLogger, reason: str) -> None:
        """The one place RayService status is written (PUT /status, like Status().Update()).

        On a conflict the live object goes into the cache and the Conflict propagates: the
        reconcile reruns on fresh data instead of overwriting a newer status.
        """
        self._refresh_derived(svc, status)
        replace_status(self.ctx.kube, self.rayservices.store, RAYSERVICES, svc,
                       {**status, "lastUpdateTime": _now()})
        log.info(
            "status written (%s): serviceStatus=%s active=%s pending=%s",
            reason,
            status.get("serviceStatus"),
            cluster_name(status, ACTIVE) or "-",
            cluster_name(status, PENDING) or "-",
        )

    def _update_state(
        self,
        svc: Obj,
        old_status: Obj,
        status: Obj,
        service_status: str,
        message: str,
        log: KeyLogger,
    ) -> Result:
        """A step failed: record it. Before the seed's change this wrote status every time."""
        status["serviceStatus"] = service_status
        log.info("%s: %s", service_status, message)
        self._refresh_derived(svc, status)
        if self._legacy or status_changed(old_status, status):
            self._write_status(svc, status, log, f"updateState {service_status}: {message}")
            self.ctx.recorder.normal(svc, service_status, message)
        return Result(self.ctx.config.service_requeue_seconds)

    def _refresh_derived(self, svc: Obj, status: Obj) -> None:
        """Fields computed from others: serve endpoints of the active cluster and conditions."""
        endpoints = self._serve_endpoints(meta(svc)["namespace"], cluster_name(status, ACTIVE))
        status["numServeEndpoints"] = endpoints
        update_conditions(status, meta(svc).get("generation"), endpoints, _now())

    def _serve_endpoints(self, namespace: str, active: str) -> int:
        """Ready Pods the serve Service selects, counted directly (not from Endpoints objects),
        so the count does not depend on an endpoints controller running in the cluster."""
        if not active:
            return 0
        pods = self.pods.store.select(namespace, {LABEL_CLUSTER: active, LABEL_SERVE: "true"})
        return sum(1 for p in pods if pod_running_and_ready(p) and not is_deleting(p))

    # ---------------------------------------------------------------- clusters

    def _reconcile_clusters(self, svc: Obj, status: Obj, log: KeyLogger) -> _Clusters:
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
            return _Clusters(active, None, True)

        if pending_name and pending is None:
            pending = self._create_cluster(svc, pending_name, config, goal, log)
        for cluster in (active, pending):
            if cluster is not None:
                self._propagate_scaling(cluster, config, log)
        return _Clusters(active, pending, False)

    def _create_cluster(
        self, svc: Obj, name: str, config: Obj, goal_hash: str, log: KeyLogger
    ) -> Obj:
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

    def _clean_up_stale_clusters(
        self, key: str, svc: Obj, status: Obj, log: KeyLogger
    ) -> float | None:
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

    def _forget_other_clusters(self, key: str, status: Obj) -> None:
        keep = {cluster_name(status, ACTIVE), cluster_name(status, PENDING)}
        with self._lock:
            submitted = self._submitted.get(key) or {}
            for name in set(submitted) - keep:
                del submitted[name]

    # ------------------------------------------------------------------- Serve

    def _reconcile_serve(
        self,
        svc: Obj,
        old_status: Obj,
        status: Obj,
        cluster: Obj,
        is_active: bool,
        log: KeyLogger,
    ) -> Result | None:
        """Returns a Result to end the reconcile with, or None to go on (Serve healthy)."""
        key = f"{meta(svc)['namespace']}/{meta(svc)['name']}"
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        served = status.setdefault(ACTIVE if is_active else PENDING, {})
        served["rayClusterName"] = name
        served["rayClusterStatus"] = cluster.get("status") or {}

        if not self._legacy and not self._head_pod_ready(svc, cluster, log):
            return Result(self.ctx.config.service_requeue_seconds)

        head_service = head_service_name(name)
        if self.services.store.get(f"{namespace}/{head_service}") is None:
            return self._update_state(
                svc,
                old_status,
                status,
                WAIT_FOR_DASHBOARD,
                f'Service "{head_service}" not found',
                log,
            )
        try:
            url = self.ctx.config.dashboard_resolver(namespace, name, head_service)
        except Exception as exc:
            set_dashboard_health(served, False, _now())
            return self._update_state(
                svc,
                old_status,
                status,
                WAIT_FOR_DASHBOARD,
                f"no Dashboard address for {name}: {exc}",
                log,
            )
        client = DashboardClient(url, self.ctx.http)

        config_text = str((svc.get("spec") or {}).get("serveConfigV2") or "")
        with self._lock:
            last_submitted = self._submitted.get(key, {}).get(name)
        if last_submitted != config_text:
            try:
                client.update_serve_applications(_serve_config(config_text))
            except (DashboardError, yaml.YAMLError, ValueError) as exc:
                set_dashboard_health(served, False, _now())
                return self._update_state(
                    svc,
                    old_status,
                    status,
                    WAIT_FOR_SERVE_DEPLOYMENT_READY,
                    f"failed to submit the Serve config: {exc}",
                    log,
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
            set_dashboard_health(served, False, _now())
            return self._update_state(
                svc,
                old_status,
                status,
                FAILED_TO_GET_SERVE_DEPLOYMENT_STATUS,
                f"failed to get Serve status: {exc}",
                log,
            )
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
            self._write_status(svc, status, log, f"Serve on {name} unhealthy beyond the threshold")
            log.info("Serve on RayCluster %s unhealthy; preparing RayCluster %s", name, new_name)
            self.ctx.recorder.normal(
                svc,
                "Restarting",
                f"The cluster will restart after {restart_after:.0f}s",
            )
            return Result(restart_after)
        status["serviceStatus"] = WAIT_FOR_SERVE_DEPLOYMENT_READY
        if self._legacy:
            self._write_status(svc, status, log, "isHealthy && !isReady")
        return None

    def _threshold(self, svc: Obj, field: str) -> float:
        value = (svc.get("spec") or {}).get(field)
        return float(value) if value is not None else self.ctx.config.unhealthy_threshold_seconds

    def _head_pod_ready(self, svc: Obj, cluster: Obj, log: KeyLogger) -> bool:
        """The seed's gate: exactly one head Pod, Running, with condition Ready=True."""
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        heads = self.pods.store.select(namespace, {LABEL_CLUSTER: name, LABEL_NODE_TYPE: NODE_HEAD})
        if len(heads) != 1:
            message = f"found {len(heads)} head Pods for RayCluster {name}, expected 1"
            if heads:
                log.error("%s; not calling the Dashboard", message)
                self.ctx.recorder.warning(svc, "InvalidHeadPodCount", message)
            else:
                log.info("%s (not created yet); not calling the Dashboard", message)
            return False
        if not pod_running_and_ready(heads[0]):
            log.info(
                "head Pod %s is not Running and Ready (phase %s); skipping the Dashboard",
                meta(heads[0])["name"],
                pod_phase(heads[0]) or "-",
            )
            return False
        return True

    # -------------------------------------------------------- Kubernetes Services

    def _reconcile_kubernetes_services(self, svc: Obj, status: Obj, log: KeyLogger) -> None:
        """``<svc>-head-svc`` and ``<svc>-serve-svc`` follow the active cluster."""
        namespace, name = meta(svc)["namespace"], meta(svc)["name"]
        active_name = cluster_name(status, ACTIVE)
        active = self.clusters.store.get(f"{namespace}/{active_name}") if active_name else None
        if active is None:
            return
        ports = head_ports(active.get("spec") or {})
        wanted = {
            f"{name}-head-svc": (
                {LABEL_CLUSTER: active_name, LABEL_NODE_TYPE: NODE_HEAD},
                service_ports(ports),
            ),
            f"{name}-serve-svc": (
                {LABEL_CLUSTER: active_name, LABEL_SERVE: "true"},
                service_ports({SERVE_PORT_NAME: ports[SERVE_PORT_NAME]}),
            ),
        }
        for service_name, (selector, service_port_list) in wanted.items():
            self._ensure_service(svc, service_name, selector, service_port_list, log)

    def _ensure_service(
        self,
        svc: Obj,
        service_name: str,
        selector: dict[str, str],
        ports: list[Obj],
        log: KeyLogger,
    ) -> None:
        namespace = meta(svc)["namespace"]
        current = self.services.store.get(f"{namespace}/{service_name}")
        if current is None:
            body = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": service_name,
                    "namespace": namespace,
                    "labels": {LABEL_SERVICE: meta(svc)["name"]},
                    "ownerReferences": [owner_reference(svc)],
                },
                "spec": {"type": "ClusterIP", "selector": selector, "ports": ports},
            }
            try:
                current = self.ctx.kube.create(SERVICES, namespace, body)
                log.info("created Service %s -> %s", service_name, selector[LABEL_CLUSTER])
            except AlreadyExists:
                current = self.ctx.kube.get(SERVICES, namespace, service_name)
            self.services.store.upsert(current)
        spec = current.get("spec") or {}
        if spec.get("selector") == selector and _port_pairs(spec.get("ports")) == _port_pairs(
            ports
        ):
            return
        spec["selector"] = selector
        spec["ports"] = ports
        current["spec"] = spec
        written = self.ctx.kube.replace(SERVICES, namespace, service_name, current)
        self.services.store.upsert(written)
        log.info("pointed Service %s at RayCluster %s", service_name, selector[LABEL_CLUSTER])


def _now() -> str:
    return format_rfc3339(datetime.now(UTC))


def _serve_config(text: str) -> dict[str, Any]:
    """serveConfigV2 is YAML in the spec; the Dashboard takes the same document as JSON."""
    config = yaml.safe_load(text) if text else {}
    if not isinstance(config, dict):
        raise ValueError("serveConfigV2 is not a YAML mapping")
    return config


def _scaling_json(fields: dict[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def _parse_scaling(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _port_pairs(ports: list[Obj] | None) -> list[tuple[str, int]]:
    return sorted((str(p.get("name")), int(p.get("port") or 0)) for p in ports or [])
