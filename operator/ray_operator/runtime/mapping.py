"""Which reconcile keys a watch event concerns.

A controller's own objects trigger it only when something other than status changed (like
controller-runtime's generation/label/annotation predicates), so its status writes do not wake it
up again. Objects it owns (Pods, Services, RayClusters) trigger the owner on every change, status
included, found through the controller ownerReference or, failing that, a label naming it.
"""

from __future__ import annotations

from collections.abc import Callable

from .informer import WatchEvent
from .objects import Obj, labels_of, meta, object_key

Enqueue = Callable[[str], None]


def spec_or_metadata_changed(event: WatchEvent) -> bool:
    if event.type != "MODIFIED" or event.old is None:
        return True
    new, old = meta(event.obj), meta(event.old)
    return any(
        new.get(field) != old.get(field)
        for field in ("generation", "labels", "annotations", "deletionTimestamp", "finalizers")
    )


def owner_keys(obj: Obj, owner_kind: str, owner_group: str) -> list[str]:
    metadata = meta(obj)
    namespace = metadata.get("namespace")
    return [
        f"{namespace}/{ref['name']}"
        for ref in metadata.get("ownerReferences") or []
        if ref.get("controller")
        and ref.get("kind") == owner_kind
        and str(ref.get("apiVersion", "")).split("/")[0] == owner_group
    ]


def primary_handler(enqueue: Enqueue) -> Callable[[WatchEvent], None]:
    def handle(event: WatchEvent) -> None:
        if spec_or_metadata_changed(event):
            enqueue(object_key(event.obj))

    return handle


def owned_handler(
    enqueue: Enqueue, owner_kind: str, owner_group: str, owner_label: str | None = None
) -> Callable[[WatchEvent], None]:
    def handle(event: WatchEvent) -> None:
        keys = owner_keys(event.obj, owner_kind, owner_group)
        if not keys and owner_label:
            name = labels_of(event.obj).get(owner_label)
            if name:
                keys = [f"{meta(event.obj).get('namespace')}/{name}"]
        for key in keys:
            enqueue(key)

    return handle
