"""The RayService's own Kubernetes Services, pointed at whichever cluster is active.

``<svc>-head-svc`` selects the active cluster's head Pod and ``<svc>-serve-svc`` its Pods that
serve, so clients keep one address across upgrades: promotion moves the selectors, not clients.
"""

from __future__ import annotations

from ...constants import (
    LABEL_CLUSTER,
    LABEL_NODE_TYPE,
    LABEL_SERVE,
    LABEL_SERVICE,
    NODE_HEAD,
    SERVE_PORT_NAME,
)
from ...resources import SERVICES
from ...runtime import AlreadyExists, Informer, KeyLogger
from ...runtime.objects import Obj, meta
from ..common import owner_reference
from ..context import Context
from ..podbuilder import head_ports, service_ports
from .status import ACTIVE, cluster_name


class ServicesStep:
    """The last step of a reconcile, once Serve is healthy."""

    def __init__(self, ctx: Context, clusters: Informer, services: Informer) -> None:
        self.ctx = ctx
        self.clusters = clusters
        self.services = services

    def reconcile(self, svc: Obj, status: Obj, log: KeyLogger) -> None:
        """Create or re-point both Services; nothing to do before there is an active cluster."""
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
            self._ensure(svc, service_name, selector, service_port_list, log)

    def _ensure(
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


def _port_pairs(ports: list[Obj] | None) -> list[tuple[str, int]]:
    return sorted((str(p.get("name")), int(p.get("port") or 0)) for p in ports or [])
