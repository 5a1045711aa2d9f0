"""RayCluster controller: head Service, head Pod, worker Pods per group, and the cluster's status.

Pods are listed live from the API server on each reconcile rather than from the cache: this
controller creates and deletes them, and a cache that has not yet seen its own writes would make
it create or delete the same Pods twice (KubeRay guards against that with "expectations"; a live
list is the simpler correct equivalent).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from ..constants import (
    LABEL_CLUSTER,
    LABEL_GROUP,
    LABEL_NODE_TYPE,
    NODE_HEAD,
    NODE_WORKER,
    RAY_GROUP,
)
from ..resources import PODS, RAYCLUSTERS, SERVICES
from ..runtime import AlreadyExists, ApiError, Conflict, Invalid, KeyLogger, NotFound, Result
from ..runtime.mapping import owned_handler, primary_handler
from ..runtime.objects import Obj, is_deleting, labels_of, meta
from ..runtime.timeutil import now_rfc3339
from .common import pod_alive, pod_phase, pod_running_and_ready
from .context import Context
from .podbuilder import (
    build_head_pod,
    build_head_service,
    build_worker_pod,
    head_ports,
    head_service_name,
)
from .statusdiff import status_changed
from .validation import desired_worker_replicas, validate_cluster_spec, worker_replica_bounds
from .writes import replace_status

STATE_READY = "ready"
STATE_UNHEALTHY = "unhealthy"
STATE_FAILED = "failed"


class RayClusterController:
    name = "raycluster"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.clusters = ctx.informers.informer(RAYCLUSTERS)
        self.services = ctx.informers.informer(SERVICES)
        self.pods = ctx.informers.informer(PODS)

    def register(self, enqueue: Callable[[str], None]) -> None:
        self.clusters.add_handler(primary_handler(enqueue))
        self.pods.add_handler(owned_handler(enqueue, "RayCluster", RAY_GROUP, LABEL_CLUSTER))
        self.services.add_handler(owned_handler(enqueue, "RayCluster", RAY_GROUP))

    def reconcile(self, key: str, log: KeyLogger) -> Result | None:
        cluster = self.clusters.store.get(key)
        if cluster is None or is_deleting(cluster):
            return None
        old_status: Obj = cluster.get("status") or {}
        status = copy.deepcopy(old_status)
        status["observedGeneration"] = meta(cluster).get("generation")
        problems = validate_cluster_spec(cluster.get("spec"))
        if problems:
            return self._fail(
                cluster, old_status, status, "invalid spec: " + "; ".join(problems), log
            )
        try:
            self._ensure_head_service(cluster, log)
            pods = self._reconcile_pods(cluster, log)
        except Invalid as exc:
            return self._fail(
                cluster,
                old_status,
                status,
                f"the API server rejected an object built from the spec: {exc.message}",
                log,
            )
        except Conflict:
            raise
        except ApiError as exc:
            log.warning(
                "reconcile error: %s; requeue in %ss", exc, self.ctx.config.error_requeue_seconds
            )
            return Result(self.ctx.config.error_requeue_seconds)
        status.pop("reason", None)
        self._fill_status(cluster, status, pods)
        if status_changed(old_status, status):
            self._write_status(cluster, status, log)
        return Result(self.ctx.config.default_requeue_seconds)

    def _fail(
        self, cluster: Obj, old_status: Obj, status: Obj, reason: str, log: KeyLogger
    ) -> Result:
        """A spec that cannot work: say so once in status and an event, then wait long (the spec
        has to change, and a spec change triggers a reconcile anyway)."""
        status["state"] = STATE_FAILED
        status["reason"] = reason
        if status_changed(old_status, status):
            log.error("RayCluster cannot be reconciled: %s", reason)
            # The event first: killed after it, a fresh instance says it once more (the status
            # still differs); killed after a status write, it would never say it at all.
            self.ctx.recorder.warning(cluster, "InvalidRayClusterSpec", reason)
            self._write_status(cluster, status, log)
        return Result(self.ctx.config.default_requeue_seconds)

    def _write_status(self, cluster: Obj, status: Obj, log: KeyLogger) -> None:
        """The one place RayCluster status is written (PUT /status, like Status().Update()).

        On a conflict the live object is put in the cache and the Conflict propagates, so the
        reconcile is retried on fresh data instead of overwriting someone else's write.
        """
        replace_status(self.ctx.kube, self.clusters.store, RAYCLUSTERS, cluster,
                       {**status, "lastUpdateTime": now_rfc3339()})
        log.info(
            "status written: state=%s available=%s desired=%s",
            status.get("state") or "-",
            status.get("availableWorkerReplicas"),
            status.get("desiredWorkerReplicas"),
        )

    def _ensure_head_service(self, cluster: Obj, log: KeyLogger) -> None:
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        if self.services.store.get(f"{namespace}/{head_service_name(name)}") is not None:
            return
        try:
            created = self.ctx.kube.create(SERVICES, namespace, build_head_service(cluster))
        except AlreadyExists:
            created = self.ctx.kube.get(SERVICES, namespace, head_service_name(name))
        else:
            log.info("created head Service %s", head_service_name(name))
            self.ctx.recorder.normal(
                cluster, "Created", f"Created service {head_service_name(name)}"
            )
        self.services.store.upsert(created)

    def _reconcile_pods(self, cluster: Obj, log: KeyLogger) -> list[Obj]:
        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        pods = self._list_pods(namespace, name)
        changed = False

        heads = [p for p in pods if labels_of(p).get(LABEL_NODE_TYPE) == NODE_HEAD]
        for pod in heads:
            changed |= self._delete_if_terminated(cluster, pod, log)
        if not any(pod_alive(p) for p in heads):
            self._create_pod(cluster, build_head_pod(cluster), "head", log)
            changed = True

        for group in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
            changed |= self._reconcile_group(cluster, group, pods, log)

        return self._list_pods(namespace, name) if changed else pods

    def _reconcile_group(self, cluster: Obj, group: Obj, pods: list[Obj], log: KeyLogger) -> bool:
        group_name = group["groupName"]
        group_pods = [
            p
            for p in pods
            if labels_of(p).get(LABEL_NODE_TYPE) == NODE_WORKER
            and labels_of(p).get(LABEL_GROUP) == group_name
        ]
        changed = False
        to_delete = set((group.get("scaleStrategy") or {}).get("workersToDelete") or [])
        remaining = []
        for pod in group_pods:
            if meta(pod)["name"] in to_delete and not is_deleting(pod):
                self._delete_pod(cluster, pod, "listed in workersToDelete", log)
                changed = True
            elif self._delete_if_terminated(cluster, pod, log):
                changed = True
            else:
                remaining.append(pod)
        alive = [p for p in remaining if pod_alive(p)]
        diff = desired_worker_replicas(group) - len(alive)
        for _ in range(max(diff, 0)):
            self._create_pod(
                cluster, build_worker_pod(cluster, group), f"worker ({group_name})", log
            )
            changed = True
        if diff < 0:
            # Prefer Pods that never started, then the newest: the least work is lost.
            newest_first = sorted(
                alive, key=lambda p: str(meta(p).get("creationTimestamp") or ""), reverse=True
            )
            victims = sorted(newest_first, key=lambda p: pod_phase(p) == "Running")[:-diff]
            for pod in victims:
                self._delete_pod(cluster, pod, "scaling down", log)
                changed = True
        return changed

    def _list_pods(self, namespace: str, cluster_name: str) -> list[Obj]:
        pods, _ = self.ctx.kube.list(PODS, namespace, f"{LABEL_CLUSTER}={cluster_name}")
        return pods

    def _create_pod(self, cluster: Obj, pod: Obj, role: str, log: KeyLogger) -> None:
        created = self.ctx.kube.create(PODS, meta(cluster)["namespace"], pod)
        pod_name = meta(created)["name"]
        log.info("created %s Pod %s", role, pod_name)
        self.ctx.recorder.normal(cluster, "Created", f"Created {role} Pod {pod_name}")

    def _delete_pod(self, cluster: Obj, pod: Obj, why: str, log: KeyLogger) -> None:
        pod_name = meta(pod)["name"]
        try:
            self.ctx.kube.delete(PODS, meta(pod)["namespace"], pod_name)
        except NotFound:
            return
        log.info("deleted Pod %s (%s)", pod_name, why)
        self.ctx.recorder.normal(cluster, "Deleted", f"Deleted Pod {pod_name} ({why})")

    def _delete_if_terminated(self, cluster: Obj, pod: Obj, log: KeyLogger) -> bool:
        if pod_phase(pod) in ("Failed", "Succeeded") and not is_deleting(pod):
            self._delete_pod(cluster, pod, f"phase {pod_phase(pod)}", log)
            return True
        return False

    def _fill_status(self, cluster: Obj, status: Obj, pods: list[Obj]) -> None:
        spec = cluster.get("spec") or {}
        groups = spec.get("workerGroupSpecs") or []
        live = [p for p in pods if not is_deleting(p)]
        heads = [p for p in live if labels_of(p).get(LABEL_NODE_TYPE) == NODE_HEAD]
        workers = [p for p in live if labels_of(p).get(LABEL_NODE_TYPE) == NODE_WORKER]
        desired = sum(desired_worker_replicas(g) for g in groups)
        status["desiredWorkerReplicas"] = desired
        status["minWorkerReplicas"] = sum(worker_replica_bounds(g)[0] for g in groups)
        status["maxWorkerReplicas"] = sum(worker_replica_bounds(g)[1] for g in groups)
        status["availableWorkerReplicas"] = sum(1 for p in workers if pod_phase(p) == "Running")

        namespace, name = meta(cluster)["namespace"], meta(cluster)["name"]
        service = self.services.store.get(f"{namespace}/{head_service_name(name)}")
        ports = (
            {
                p["name"]: p["port"]
                for p in (service.get("spec") or {}).get("ports") or []
                if p.get("name")
            }
            if service
            else head_ports(spec)
        )
        status["endpoints"] = {port_name: str(port) for port_name, port in sorted(ports.items())}
        head = _pick_head(heads)
        status["head"] = {
            "podIP": ((head or {}).get("status") or {}).get("podIP") or "",
            "serviceIP": ((service or {}).get("spec") or {}).get("clusterIP") or "",
        }

        complete = len(heads) == 1 and len(workers) == desired
        if complete and all(pod_running_and_ready(p) for p in live):
            status["state"] = STATE_READY
        elif status.get("state") in (STATE_READY, STATE_UNHEALTHY):
            status["state"] = STATE_UNHEALTHY
        else:
            status.pop("state", None)


def _pick_head(heads: list[Obj]) -> Obj | None:
    running = [p for p in heads if pod_phase(p) == "Running"]
    candidates = running or heads
    return candidates[0] if candidates else None
