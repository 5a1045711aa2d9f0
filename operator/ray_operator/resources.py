"""The REST resources the operator reads and writes."""

from __future__ import annotations

from .constants import RAY_GROUP, RAY_VERSION
from .runtime.client import Resource

PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
RAYCLUSTERS = Resource(RAY_GROUP, RAY_VERSION, "rayclusters", "RayCluster")
RAYSERVICES = Resource(RAY_GROUP, RAY_VERSION, "rayservices", "RayService")
RAYJOBS = Resource(RAY_GROUP, RAY_VERSION, "rayjobs", "RayJob")
