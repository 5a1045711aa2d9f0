"""The local cache of watched objects (one per informer).

Reads return deep copies so a reconcile can mutate what it got without corrupting the cache.
Writes made by the operator itself are put in with ``upsert`` too, so the next reconcile reads its
own writes even before the watch delivers them; a watch event older than what is stored is then
ignored (resourceVersions are compared as integers, as etcd issues them; a non-numeric one is
always taken, being opaque).
"""

from __future__ import annotations

import copy
import threading

from .objects import Obj, labels_of, meta, object_key


def _rv(obj: Obj) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def is_not_older(new: Obj, old: Obj) -> bool:
    """True unless both resourceVersions are numeric and ``new``'s is lower."""
    try:
        return int(_rv(new)) >= int(_rv(old))
    except ValueError:
        return True


def labels_match(obj: Obj, selector: dict[str, str]) -> bool:
    labels = labels_of(obj)
    return all(labels.get(k) == v for k, v in selector.items())


class Store:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        with self._lock:
            obj = self._items.get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def select(
        self, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[Obj]:
        with self._lock:
            found = [
                obj
                for obj in self._items.values()
                if (namespace is None or obj["metadata"].get("namespace") == namespace)
                and (not labels or labels_match(obj, labels))
            ]
            return copy.deepcopy(found)

    def upsert(self, obj: Obj) -> tuple[Obj | None, bool]:
        """Store ``obj`` unless a newer version is stored; returns (previous, stored)."""
        key = object_key(obj)
        with self._lock:
            old = self._items.get(key)
            if old is not None and not is_not_older(obj, old):
                return old, False
            self._items[key] = obj
            return old, True

    def remove(self, obj: Obj) -> Obj | None:
        with self._lock:
            return self._items.pop(object_key(obj), None)

    def replace(self, items: list[Obj]) -> list[tuple[str, Obj, Obj | None]]:
        """Swap in a fresh list; returns (ADDED|SYNC|DELETED, object, previous) for each key."""
        fresh = {object_key(obj): obj for obj in items}
        with self._lock:
            old_items, self._items = self._items, fresh
        changes: list[tuple[str, Obj, Obj | None]] = []
        for key, obj in fresh.items():
            old = old_items.get(key)
            changes.append(("ADDED" if old is None else "SYNC", obj, old))
        for key, old in old_items.items():
            if key not in fresh:
                changes.append(("DELETED", old, old))
        return changes
