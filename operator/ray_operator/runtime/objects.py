"""Kubernetes objects as plain dicts: the one alias and the accessors every layer reads them with.

The operator handles Pods, Services and Ray custom resources alike as the JSON the API server
sends (see ``client``), so these live at the bottom of the package, below both the runtime and
the controllers, and nothing else defines its own ``Obj`` or ``metadata`` getter.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
"""A Kubernetes object (or any part of one) as decoded JSON."""


def meta(obj: Obj | None) -> Obj:
    """``metadata``, or an empty dict when the object (or its metadata) is missing."""
    return (obj or {}).get("metadata") or {}


def labels_of(obj: Obj | None) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj | None) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def is_deleting(obj: Obj) -> bool:
    """Marked for deletion (finalizers or foreground deletion may keep it around a while)."""
    return bool(meta(obj).get("deletionTimestamp"))


def object_key(obj: Obj) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects): the work queue's key."""
    metadata = meta(obj)
    ns = metadata.get("namespace")
    return f"{ns}/{metadata.get('name')}" if ns else str(metadata.get("name"))
