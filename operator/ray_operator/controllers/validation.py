"""RayCluster spec checks the schema cannot express, reported in status instead of crash-looping.

The CRD schema rejects what it can (negative replicas, missing template); what needs cross-field
logic is checked here so a bad spec ends as ``state: failed`` with a reason and one Warning event.
"""

from __future__ import annotations

from typing import Any

from ..runtime.objects import Obj


def _container_problems(where: str, template: Any) -> list[str]:
    spec = (template or {}).get("spec") if isinstance(template, dict) else None
    containers = (spec or {}).get("containers") if isinstance(spec, dict) else None
    if not containers:
        return [f"{where}: the Pod template has no container"]
    problems = []
    for index, container in enumerate(containers):
        if not isinstance(container, dict) or not container.get("name"):
            problems.append(f"{where}: container {index} has no name")
        elif not container.get("image"):
            problems.append(f"{where}: container {container['name']!r} has no image")
    return problems


def worker_replica_bounds(group: Obj) -> tuple[int, int]:
    return int(group.get("minReplicas") or 0), int(group.get("maxReplicas", 2**31 - 1))


def validate_cluster_spec(spec: Obj | None) -> list[str]:
    if not spec:
        return ["spec is missing"]
    head = spec.get("headGroupSpec")
    problems = (
        _container_problems("headGroupSpec", head.get("template"))
        if isinstance(head, dict)
        else ["headGroupSpec is missing"]
    )
    seen: set[str] = set()
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        name = group.get("groupName") or ""
        where = f"workerGroupSpecs[{index}] ({name or 'unnamed'})"
        if not name:
            problems.append(f"{where}: groupName is empty")
        elif name in seen:
            problems.append(f"{where}: groupName {name!r} is used twice")
        seen.add(name)
        low, high = worker_replica_bounds(group)
        if low > high:
            problems.append(f"{where}: minReplicas {low} is greater than maxReplicas {high}")
        problems.extend(_container_problems(where, group.get("template")))
    return problems


def desired_worker_replicas(group: Obj) -> int:
    """``replicas`` (default minReplicas) clamped to [minReplicas, maxReplicas], as KubeRay does."""
    low, high = worker_replica_bounds(group)
    replicas = group.get("replicas")
    wanted = low if replicas is None else int(replicas)
    return max(low, min(high, wanted))
