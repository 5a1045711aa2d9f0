"""Helpers the controllers share: generated names, owner references and Pod state.

Plain object access (``Obj``, ``meta``, labels, annotations, deletion) lives in
``runtime.objects``, below the controllers, so the runtime reads objects the same way.
"""

from __future__ import annotations

import secrets

from ..runtime.objects import Obj, is_deleting, meta

# apimachinery's rand.String alphabet: lowercase alphanumerics without vowels and look-alikes,
# so generated names never spell words and read unambiguously.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def owner_reference(owner: Obj) -> Obj:
    """A controller reference; blockOwnerDeletion as KubeRay sets it (foreground deletion of the
    owner waits for the dependents)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta(owner)["name"],
        "uid": meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def pod_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_running_and_ready(pod: Obj) -> bool:
    return pod_phase(pod) == "Running" and pod_ready(pod)


def pod_alive(pod: Obj) -> bool:
    """Counts toward a group's replicas: Running or Pending and not being deleted."""
    return pod_phase(pod) in ("Running", "Pending") and not is_deleting(pod)
