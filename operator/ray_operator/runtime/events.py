"""Kubernetes Events for the objects the operator manages, aggregated like client-go's recorder.

A repeated event (same object, type, reason and message) bumps ``count`` and ``lastTimestamp`` on
the Event already created instead of creating another, so a condition reported on every
reconcile (e.g. two head Pods) stays one Event. Events are best effort: failures are logged and
never fail a reconcile.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections import OrderedDict
from typing import Any

from .client import KubeClient, NotFound, Resource, describe_error
from .timeutil import now_rfc3339

log = logging.getLogger("ray_operator.runtime.events")

EVENTS = Resource("", "v1", "events", "Event")
_MAX_TRACKED = 4096


class EventRecorder:
    def __init__(self, kube: KubeClient, component: str) -> None:
        self._kube = kube
        self._component = component
        self._instance = f"{socket.gethostname()}-{os.getpid()}"
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, str, int]] = OrderedDict()

    def normal(self, obj: dict[str, Any], reason: str, message: str) -> None:
        self.record(obj, "Normal", reason, message)

    def warning(self, obj: dict[str, Any], reason: str, message: str) -> None:
        self.record(obj, "Warning", reason, message)

    def record(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        identity = (str(meta.get("uid")), event_type, reason, message)
        now = now_rfc3339()
        with self._lock:
            previous = self._seen.get(identity)
        try:
            if previous is not None:
                name, ns, count = previous
                try:
                    self._kube.patch(EVENTS, ns, name, {"count": count + 1, "lastTimestamp": now})
                    self._remember(identity, (name, ns, count + 1))
                    return
                except NotFound:
                    pass  # expired or deleted: create a fresh one
            created = self._kube.create(
                EVENTS, namespace, self._event(obj, namespace, event_type, reason, message, now)
            )
            self._remember(identity, (created["metadata"]["name"], namespace, 1))
        except Exception as exc:  # API errors and connection errors alike
            log.warning(
                "could not record event %s/%s on %s: %s",
                event_type,
                reason,
                meta.get("name"),
                describe_error(exc),
            )

    def _remember(self, identity: tuple[str, str, str, str], value: tuple[str, str, int]) -> None:
        with self._lock:
            self._seen[identity] = value
            self._seen.move_to_end(identity)
            while len(self._seen) > _MAX_TRACKED:
                self._seen.popitem(last=False)

    def _event(
        self,
        obj: dict[str, Any],
        namespace: str,
        event_type: str,
        reason: str,
        message: str,
        now: str,
    ) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
