"""One FakeRayDashboard per RayCluster head, created on demand, addressed through a resolver.

``fleet.resolver`` is a ``DashboardResolver`` for an in-process operator; with ``map_file`` the
fleet also keeps a JSON map for an operator in another process (see ``mapfile``).
``start_when_head_ready`` watches head Pods and starts a cluster's Dashboard once its head Pod is
Running and Ready (after an optional delay), the way a real head's Dashboard comes up.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kubernetes.client import ApiClient

from ..constants import LABEL_CLUSTER, LABEL_NODE_TYPE, NODE_HEAD
from ..controllers.common import pod_running_and_ready
from ..resources import PODS
from ..runtime import Informer, KubeClient, WatchEvent
from ..runtime.objects import is_deleting, labels_of, meta
from .fake_dashboard import FakeRayDashboard, JournalEntry, ServePolicy
from .mapfile import write_dashboard_map


class FakeDashboardFleet:
    def __init__(
        self,
        *,
        namespace: str = "default",
        auto_start: bool = False,
        serve_policy: ServePolicy | None = None,
        map_file: str | os.PathLike[str] | None = None,
    ) -> None:
        """``namespace``: the one meant by a bare cluster name in ``fleet[name]``.
        ``auto_start``/``serve_policy``: how new dashboards begin (default: refusing)."""
        self.namespace = namespace
        self.auto_start = auto_start
        self.serve_policy = serve_policy or ServePolicy()
        self.map_file = Path(map_file) if map_file is not None else None
        self._lock = threading.RLock()
        self._dashboards: dict[tuple[str, str], FakeRayDashboard] = {}
        self._watchers: list[HeadReadyWatcher] = []
        if self.map_file is not None:
            self._write_map()

    def dashboard(self, namespace: str, cluster: str) -> FakeRayDashboard:
        """The cluster's dashboard, created (refusing unless ``auto_start``) if new."""
        with self._lock:
            key = (namespace, cluster)
            if key not in self._dashboards:
                fake = FakeRayDashboard(
                    name=f"{namespace}/{cluster}", serve_policy=self.serve_policy
                )
                if self.auto_start:
                    fake.start()
                self._dashboards[key] = fake
                self._write_map()
            return self._dashboards[key]

    def resolver(self, namespace: str, raycluster_name: str, head_service_name: str) -> str:
        return self.dashboard(namespace, raycluster_name).url

    def __getitem__(self, cluster: str) -> FakeRayDashboard:
        """``fleet["name"]`` (in ``self.namespace``) or ``fleet["namespace/name"]``."""
        namespace, _, name = cluster.rpartition("/")
        return self.dashboard(namespace or self.namespace, name)

    def __contains__(self, cluster: str) -> bool:
        namespace, _, name = cluster.rpartition("/")
        with self._lock:
            return (namespace or self.namespace, name) in self._dashboards

    def clusters(self) -> list[str]:
        with self._lock:
            return [f"{ns}/{name}" for ns, name in self._dashboards]

    def all_requests(self) -> list[tuple[str, JournalEntry]]:
        """Every journaled request of all dashboards as ``(namespace/cluster, entry)``, by time."""
        with self._lock:
            dashboards = dict(self._dashboards)
        entries = [
            (f"{ns}/{name}", entry)
            for (ns, name), fake in dashboards.items()
            for entry in fake.journal
        ]
        return sorted(entries, key=lambda item: item[1].monotonic)

    def start_when_head_ready(
        self, api_client: ApiClient, namespace: str, delay_seconds: float = 0.0
    ) -> HeadReadyWatcher:
        watcher = HeadReadyWatcher(self, api_client, namespace, delay_seconds)
        with self._lock:
            self._watchers.append(watcher)
        watcher.start()
        return watcher

    def close(self) -> None:
        with self._lock:
            watchers, self._watchers = self._watchers, []
            dashboards = list(self._dashboards.values())
        for watcher in watchers:
            watcher.stop()
        for fake in dashboards:
            fake.stop()

    def __enter__(self) -> FakeDashboardFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write_map(self) -> None:
        if self.map_file is None:
            return
        write_dashboard_map(
            self.map_file,
            {f"{ns}/{name}": fake.url for (ns, name), fake in self._dashboards.items()},
        )


class HeadReadyWatcher:
    """Watches head Pods in one namespace: makes each cluster's dashboard exist as soon as its
    head Pod does (so a map file names it), and starts it once the head Pod is Running and Ready
    plus ``delay_seconds``. Starting is one-way: a head that stops being Ready later is left to
    the test."""

    def __init__(
        self, fleet: FakeDashboardFleet, api_client: ApiClient, namespace: str, delay: float
    ) -> None:
        self._fleet = fleet
        self._namespace = namespace
        self._delay = delay
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._timers: dict[str, threading.Timer] = {}
        self.error: BaseException | None = None
        self.ready_at: dict[str, float] = {}
        """Cluster name -> monotonic time its head Pod was first seen Running and Ready."""
        self._informer = Informer(
            KubeClient(api_client),
            PODS,
            namespace,
            halt=self._halt,
            on_fatal=self._fatal,
            watch_timeout_seconds=5,
        )
        self._informer.add_handler(self._on_pod)
        self._thread = threading.Thread(
            target=self._informer.run, name=f"head-ready-watcher-{namespace}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def wait_synced(self, timeout: float = 10.0) -> bool:
        return self._informer.synced.wait(timeout)

    def stop(self) -> None:
        self._halt.set()
        self._informer.interrupt()
        with self._lock:
            timers, self._timers = list(self._timers.values()), {}
        for timer in timers:
            timer.cancel()
        self._thread.join(5.0)

    def _fatal(self, error: BaseException) -> None:
        self.error = error

    def _on_pod(self, event: WatchEvent) -> None:
        pod = event.obj
        pod_labels = labels_of(pod)
        cluster = pod_labels.get(LABEL_CLUSTER)
        if event.type == "DELETED" or not cluster or pod_labels.get(LABEL_NODE_TYPE) != NODE_HEAD:
            return
        fake = self._fleet.dashboard(meta(pod).get("namespace") or self._namespace, cluster)
        if not pod_running_and_ready(pod) or is_deleting(pod) or fake.serving:
            return
        with self._lock:
            if cluster in self._timers or self._halt.is_set():
                return
            self.ready_at[cluster] = time.monotonic()
            timer = threading.Timer(self._delay, self._start, args=(fake,))
            timer.daemon = True
            self._timers[cluster] = timer
        timer.start()

    def _start(self, fake: FakeRayDashboard) -> None:
        if not self._halt.is_set():
            fake.start()
