"""Pods and the head Service of a RayCluster, built from its spec the way KubeRay builds them."""

from __future__ import annotations

import copy
from typing import Any

from ..constants import (
    APP_NAME,
    CREATED_BY_OPERATOR,
    CREATED_BY_RAYSERVICE,
    DEFAULT_HEAD_PORTS,
    HEAD_GROUP,
    LABEL_APP_NAME,
    LABEL_CLUSTER,
    LABEL_CREATED_BY,
    LABEL_GROUP,
    LABEL_IDENTIFIER,
    LABEL_IS_RAY_NODE,
    LABEL_NODE_TYPE,
    LABEL_SERVE,
    NODE_HEAD,
    NODE_WORKER,
)
from ..runtime.objects import Obj, labels_of, meta
from .common import owner_reference


def head_service_name(cluster_name: str) -> str:
    return f"{cluster_name}-head-svc"


def node_labels(cluster: Obj, node_type: str, group: str) -> dict[str, str]:
    """The labels KubeRay puts on every Ray Pod; they override same-named template labels."""
    name = meta(cluster)["name"]
    result = {
        LABEL_CLUSTER: name,
        LABEL_NODE_TYPE: node_type,
        LABEL_GROUP: group,
        LABEL_IDENTIFIER: f"{name}-{node_type}",
        LABEL_IS_RAY_NODE: "yes",
        LABEL_APP_NAME: APP_NAME,
        LABEL_CREATED_BY: CREATED_BY_OPERATOR,
    }
    if labels_of(cluster).get(LABEL_CREATED_BY) == CREATED_BY_RAYSERVICE:
        # Clusters of a RayService are selected by its serve Service.
        result[LABEL_SERVE] = "true"
    return result


def head_ports(cluster_spec: Obj) -> dict[str, int]:
    """Named ports of the head container, completed with KubeRay's defaults."""
    ports = dict(DEFAULT_HEAD_PORTS)
    containers = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get(
        "spec", {}
    ).get("containers") or []
    if containers:
        for port in containers[0].get("ports") or []:
            if port.get("name") and port.get("containerPort"):
                ports[str(port["name"])] = int(port["containerPort"])
    return ports


def _start_command(params: dict[str, Any], head: bool, head_address: str) -> str:
    args = ["ray start", "--head" if head else f"--address={head_address}", "--block"]
    defaults = {"dashboard-host": "0.0.0.0"} if head else {}
    for key, value in sorted({**defaults, **params}.items()):
        value = str(value)
        if value.lower() == "true":
            args.append(f"--{key}")
        elif value.lower() != "false":
            args.append(f"--{key}={value}")
    return "ulimit -n 65536; " + " ".join(args)


def _pod(cluster: Obj, group_spec: Obj, node_type: str, group: str, generate_name: str) -> Obj:
    cluster_meta = meta(cluster)
    name, namespace = cluster_meta["name"], cluster_meta["namespace"]
    template = copy.deepcopy(group_spec.get("template") or {})
    template_meta = meta(template)
    pod_labels = {**(template_meta.get("labels") or {}), **node_labels(cluster, node_type, group)}
    spec = template.get("spec") or {}
    head = node_type == NODE_HEAD
    gcs_port = head_ports(cluster.get("spec") or {})["gcs-server"]
    head_host = f"{head_service_name(name)}.{namespace}.svc.cluster.local"
    ray = spec["containers"][0]
    if not ray.get("command"):
        ray["command"] = ["/bin/bash", "-lc", "--"]
        ray["args"] = [
            _start_command(group_spec.get("rayStartParams") or {}, head, f"{head_host}:{gcs_port}")
        ]
    env = [e for e in ray.get("env") or [] if e.get("name") not in ("RAY_CLUSTER_NAME", "RAY_IP")]
    env.append({"name": "RAY_CLUSTER_NAME", "value": name})
    if not head:
        env.append({"name": "RAY_IP", "value": head_host})
    ray["env"] = env
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": generate_name,
            "namespace": namespace,
            "labels": pod_labels,
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": spec,
    }


def build_head_pod(cluster: Obj) -> Obj:
    spec = cluster.get("spec") or {}
    name = meta(cluster)["name"]
    return _pod(cluster, spec["headGroupSpec"], NODE_HEAD, HEAD_GROUP, f"{name}-head-")


def build_worker_pod(cluster: Obj, group_spec: Obj) -> Obj:
    name = meta(cluster)["name"]
    group = group_spec["groupName"]
    return _pod(cluster, group_spec, NODE_WORKER, group, f"{name}-worker-{group}-")


def build_head_service(cluster: Obj) -> Obj:
    cluster_meta = meta(cluster)
    name = cluster_meta["name"]
    spec = cluster.get("spec") or {}
    head_spec = spec.get("headGroupSpec") or {}
    service_labels = {
        LABEL_CLUSTER: name,
        LABEL_NODE_TYPE: NODE_HEAD,
        LABEL_IDENTIFIER: f"{name}-{NODE_HEAD}",
        LABEL_APP_NAME: APP_NAME,
        LABEL_CREATED_BY: CREATED_BY_OPERATOR,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": head_service_name(name),
            "namespace": cluster_meta["namespace"],
            "labels": service_labels,
            "annotations": dict(spec.get("headServiceAnnotations") or {}),
            "ownerReferences": [owner_reference(cluster)],
        },
        "spec": {
            "type": head_spec.get("serviceType") or "ClusterIP",
            "selector": {LABEL_CLUSTER: name, LABEL_NODE_TYPE: NODE_HEAD},
            "ports": service_ports(head_ports(spec)),
        },
    }


def service_ports(ports: dict[str, int]) -> list[Obj]:
    return [
        {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
        for port_name, port in sorted(ports.items())
    ]
