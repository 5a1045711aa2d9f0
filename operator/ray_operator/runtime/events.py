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

from .client import KubeClient, NotFound, Resource, describe_error
from .objects import Obj, meta
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

    def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.record(obj, "Normal", reason, message)

    def warning(self, obj: Obj, reason: str, message: str) -> None:
        self.record(obj, "Warning", reason, message)

    def record(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        metadata = meta(obj)
        namespace = metadata.get("namespace") or "default"
        identity = (str(metadata.get("uid")), event_type, reason, message)
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
            self._remember(identity, (meta(created)["name"], namespace, 1))
        except Exception as exc:  # API errors and connection errors alike
            log.warning(
                "could not record event %s/%s on %s: %s",
                event_type,
                reason,
                metadata.get("name"),
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
        obj: Obj,
        namespace: str,
        event_type: str,
        reason: str,
        message: str,
        now: str,
    ) -> Obj:
        metadata = meta(obj)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{metadata.get('name')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": metadata.get("name"),
                "namespace": metadata.get("namespace"),
                "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
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
