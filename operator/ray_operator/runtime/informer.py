"""List+watch of one resource into a Store, with handlers called on every change.

The informer keeps the resourceVersion of the last event (bookmarks included) and resumes the
watch from it after each server-side timeout, so nothing is missed between watches. When the
server answers 410 Gone the version is too old: the informer lists again, diffs the list against
the store (synthesising DELETED for objects that vanished meanwhile) and reports every surviving
object as SYNC so controllers reconcile everything once more.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .client import (
    ApiError,
    Forbidden,
    Gone,
    KubeClient,
    Resource,
    Unauthorized,
    WatchStream,
    describe_error,
)
from .objects import Obj, meta
from .store import Store

log = logging.getLogger("ray_operator.runtime.informer")


@dataclass(frozen=True)
class WatchEvent:
    """ADDED, MODIFIED, DELETED or SYNC (after a relist). ``obj`` is shared: read, never mutate."""

    type: str
    obj: Obj
    old: Obj | None


Handler = Callable[[WatchEvent], None]


class Informer:
    def __init__(
        self,
        kube: KubeClient,
        resource: Resource,
        namespace: str | None,
        *,
        halt: threading.Event,
        on_fatal: Callable[[BaseException], None],
        watch_timeout_seconds: int,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.store = Store()
        self.synced = threading.Event()
        self.last_error: BaseException | None = None
        self.relists = 0
        """Full lists so far: 1 after the first sync, one more after each 410 Gone."""
        self._halt = halt
        self._on_fatal = on_fatal
        self._watch_timeout = watch_timeout_seconds
        self._handlers: list[Handler] = []
        self._resource_version = ""
        self._stream: WatchStream | None = None
        self._stream_lock = threading.Lock()

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def run(self) -> None:
        """Thread body: returns when halted, or after reporting a fatal (auth) error met before
        the first sync."""
        must_list = True
        failures = 0
        while not self._halt.is_set():
            try:
                if must_list:
                    self._relist()
                    must_list = False
                self._watch_once()
                failures = 0
            except Gone:
                log.info("watch of %s expired (410 Gone); relisting", self.resource)
                must_list = True
            except (Unauthorized, Forbidden) as exc:
                if not self.synced.is_set():
                    self._on_fatal(
                        PermissionError(f"cannot list/watch {self.resource}: {exc.message or exc}")
                    )
                    return
                # Access was granted before: a refusal now comes from an apiserver still starting
                # (its authorizer's caches not yet filled) or an RBAC edit in flight. Retry, as
                # client-go's reflector does, instead of taking the whole operator down.
                failures = self._retry_later(exc, failures)
            except Exception as exc:  # connection loss, 5xx, CRD not installed yet, ...
                if self._halt.is_set():
                    return
                failures = self._retry_later(exc, failures)

    def _retry_later(self, exc: Exception, failures: int) -> int:
        """Log the failure and wait out a growing delay; returns the new failure count."""
        failures += 1
        self.last_error = exc
        delay = min(0.2 * 2 ** min(failures, 6), 10.0)
        log.warning(
            "list/watch of %s failed (%s); retrying in %.1fs",
            self.resource,
            describe_error(exc),
            delay,
        )
        self._halt.wait(delay)
        return failures

    def interrupt(self) -> None:
        """Unblock a thread reading the current watch (used on shutdown)."""
        with self._stream_lock:
            if self._stream is not None:
                self._stream.interrupt()

    def _relist(self) -> None:
        items, version = self.kube.list(self.resource, self.namespace)
        changes = self.store.replace(items)
        self._resource_version = version
        self.relists += 1
        self.last_error = None
        self.synced.set()
        for kind, obj, old in changes:
            self._dispatch(WatchEvent(kind, obj, old))

    def _watch_once(self) -> None:
        stream = self.kube.watch(
            self.resource, self.namespace, self._resource_version, self._watch_timeout
        )
        with self._stream_lock:
            self._stream = stream
        try:
            if self._halt.is_set():
                return
            for event in stream:
                self._handle(event)
                if self._halt.is_set():
                    return
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()

    def _handle(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            raise ApiError.from_status(int(obj.get("code") or 500), obj)
        version = str(meta(obj).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            self._resource_version = version
            return
        if kind == "DELETED":
            old = self.store.remove(obj)
            stored = True
        else:
            old, stored = self.store.upsert(obj)
        self._resource_version = version
        if stored:
            self._dispatch(WatchEvent(str(kind), obj, old))

    def _dispatch(self, event: WatchEvent) -> None:
        for handler in self._handlers:
            try:
                handler(event)
            except Exception:
                log.exception("event handler failed for %s %s", self.resource, event.type)


class InformerFactory:
    """One shared informer per resource, created on first request, as controllers need them."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str | None,
        *,
        halt: threading.Event,
        on_fatal: Callable[[BaseException], None],
        watch_timeout_seconds: int,
    ) -> None:
        self._kube = kube
        self._namespace = namespace
        self._halt = halt
        self._on_fatal = on_fatal
        self._watch_timeout = watch_timeout_seconds
        self._informers: dict[Resource, Informer] = {}

    def informer(self, resource: Resource) -> Informer:
        if resource not in self._informers:
            self._informers[resource] = Informer(
                self._kube,
                resource,
                self._namespace,
                halt=self._halt,
                on_fatal=self._on_fatal,
                watch_timeout_seconds=self._watch_timeout,
            )
        return self._informers[resource]

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def interrupt_all(self) -> None:
        for informer in self._informers.values():
            informer.interrupt()
