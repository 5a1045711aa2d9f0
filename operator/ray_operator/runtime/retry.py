"""Read-modify-write with retries on 409 Conflict, for spec and metadata updates."""

from __future__ import annotations

from collections.abc import Callable

from .client import Conflict, KubeClient, Resource
from .objects import Obj


def update_with_retry(
    kube: KubeClient,
    resource: Resource,
    namespace: str,
    name: str,
    mutate: Callable[[Obj], bool],
    *,
    current: Obj | None = None,
    attempts: int = 5,
) -> Obj | None:
    """Apply ``mutate`` (returns False when nothing needs changing) and PUT; on a conflict re-read
    the live object and try again. Returns the written object, or None when nothing changed.

    ``current`` (e.g. from the cache) saves the first GET; a stale one just costs one conflict.
    """
    obj = current if current is not None else kube.get(resource, namespace, name)
    for attempt in range(attempts):
        if not mutate(obj):
            return None
        try:
            return kube.replace(resource, namespace, name, obj)
        except Conflict:
            if attempt == attempts - 1:
                raise
            obj = kube.get(resource, namespace, name)
    raise AssertionError("unreachable")
