"""The RayService's cluster hash: what decides whether a spec change needs a new RayCluster.

Worker ``replicas`` and ``scaleStrategy.workersToDelete`` are blanked before hashing because the
autoscaler rewrites them all the time; such edits must never roll out a new cluster. The hash is
SHA-1 over canonical JSON (sorted keys), base32-encoded like KubeRay's GenerateJsonHash.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

from ..runtime.objects import Obj


def _without_scaling_fields(cluster_spec: Obj) -> Obj:
    spec = copy.deepcopy(cluster_spec or {})
    for group in spec.get("workerGroupSpecs") or []:
        group.pop("replicas", None)
        strategy = group.get("scaleStrategy")
        if isinstance(strategy, dict):
            strategy.pop("workersToDelete", None)
            if not strategy:
                group.pop("scaleStrategy")
    return spec


def cluster_hash(cluster_spec: Obj) -> str:
    canonical = json.dumps(
        _without_scaling_fields(cluster_spec), sort_keys=True, separators=(",", ":")
    )
    return base64.b32encode(
        hashlib.sha1(canonical.encode(), usedforsecurity=False).digest()
    ).decode()


def scaling_fields(cluster_spec: Obj) -> dict[str, dict[str, Any]]:
    """Per worker group: the fields the hash ignores, as the RayService spec sets them."""
    return {
        str(group.get("groupName")): {
            "replicas": group.get("replicas"),
            "workersToDelete": list(
                (group.get("scaleStrategy") or {}).get("workersToDelete") or []
            ),
        }
        for group in (cluster_spec or {}).get("workerGroupSpecs") or []
    }
