"""The operator: shared informers feeding the enabled controllers, run until told to stop.

``Operator.run`` blocks the calling thread, so a test can run the operator in a thread of its
own process and stop it with an Event; the CLI runs the same thing in the main thread.
``Operator.controller(name)`` gives the running controllers and the records they keep.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration

from .config import OperatorConfig
from .constants import COMPONENT
from .controllers.context import Context
from .controllers.registry import CONTROLLER_TYPES
from .dashboard import new_http_client
from .runtime import Controller, EventRecorder, InformerFactory, KubeClient, describe_error

log = logging.getLogger("ray_operator.manager")
# Two events cannot be waited on together; waiting on one in slices this long lets the other
# (the caller's stop, the operator's own halt on a fatal error) be noticed promptly.
_WAIT_SLICE = 0.05


class Operator:
    def __init__(self, api_client: ApiClient, config: OperatorConfig | None = None) -> None:
        self.api_client = api_client
        self.config = config or OperatorConfig()
        self.started = threading.Event()
        """Set once the caches are synced and the controllers are running."""
        self.informers: InformerFactory | None = None
        """The shared informers of the current run (for diagnostics, e.g. their ``relists``)."""
        self._controllers: dict[str, Controller] = {}
        self._halt = threading.Event()
        self._fatal: BaseException | None = None
        self._fatal_lock = threading.Lock()

    def run(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set; return once every thread has ended. Re-raises a fatal
        error (forbidden, caches never synced) after shutting down."""
        if self._halt.is_set():
            raise RuntimeError("an Operator runs once; create a new one")
        kube = KubeClient(self.api_client)
        informers = InformerFactory(
            kube,
            self.config.namespace,
            halt=self._halt,
            on_fatal=self._fail,
            watch_timeout_seconds=self.config.watch_timeout_seconds,
        )
        self.informers = informers
        http = new_http_client(self.config.dashboard_timeout_seconds)
        ctx = Context(kube, informers, EventRecorder(kube, COMPONENT), self.config, http)
        controllers = []
        for name in self.config.controllers:
            reconciler = CONTROLLER_TYPES[name](ctx)
            controller = Controller(
                reconciler,
                workers=self.config.workers,
                backoff_base_seconds=self.config.backoff_base_seconds,
                backoff_max_seconds=self.config.backoff_max_seconds,
            )
            reconciler.register(controller.enqueue)
            controllers.append(controller)
        self._controllers = {c.name: c for c in controllers}

        threads = [
            threading.Thread(target=i.run, name=f"informer-{i.resource}", daemon=True)
            for i in informers.informers
        ]
        for thread in threads:
            thread.start()
        try:
            if self._wait_for_sync(informers, stop):
                log.info(
                    "caches synced; starting controllers=%s namespace=%s serve_gate=%s",
                    ",".join(self.config.controllers),
                    self.config.namespace or "*",
                    self.config.serve_gate,
                )
                for controller in controllers:
                    threads.extend(controller.start())
                self.started.set()
                while not stop.wait(_WAIT_SLICE) and not self._halt.is_set():
                    pass
        finally:
            self._shutdown(informers, controllers, threads)
            http.close()
        if self._fatal is not None:
            raise self._fatal

    def controller(self, name: str) -> Controller:
        """The controller ``name`` of this run (``raycluster``, ``rayservice``, ``rayjob``).

        It exists from early in ``run`` (before ``started`` is set) and stays readable after
        ``run`` returns. Its ``retries`` holds a ``Retry`` per failed reconcile; its
        ``reconciler`` is the implementation, e.g. the ``RayServiceController`` with its
        ``gate_skips``. Raises LookupError for a controller not enabled, or before ``run``.
        """
        try:
            return self._controllers[name]
        except KeyError:
            running = ", ".join(self._controllers) or "none yet"
            raise LookupError(f"no controller {name!r} in this run (running: {running})") from None

    def _fail(self, error: BaseException) -> None:
        with self._fatal_lock:
            if self._fatal is None:
                self._fatal = error
                log.error("fatal: %s", describe_error(error))
        self._halt.set()

    def _wait_for_sync(self, informers: InformerFactory, stop: threading.Event) -> bool:
        deadline = time.monotonic() + self.config.cache_sync_timeout_seconds
        for informer in informers.informers:
            while not informer.synced.wait(_WAIT_SLICE):
                if stop.is_set() or self._halt.is_set():
                    return False
                if time.monotonic() > deadline:
                    cause = (
                        describe_error(informer.last_error) if informer.last_error else "no answer"
                    )
                    self._fail(
                        TimeoutError(
                            f"cache of {informer.resource} not synced after "
                            f"{self.config.cache_sync_timeout_seconds:.0f}s (last error: {cause}); "
                            "are the CRDs installed and the API server reachable?"
                        )
                    )
                    return False
        return True

    def _shutdown(
        self,
        informers: InformerFactory,
        controllers: list[Controller],
        threads: list[threading.Thread],
    ) -> None:
        self._halt.set()
        informers.interrupt_all()
        for controller in controllers:
            controller.stop()
        deadline = time.monotonic() + self.config.shutdown_timeout_seconds
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            log.warning(
                "threads still running after %.0fs: %s",
                self.config.shutdown_timeout_seconds,
                ", ".join(stuck),
            )
        log.info("operator stopped")


def api_client_from(kubeconfig: str | None = None) -> ApiClient:
    """A kubeconfig (the argument, else $KUBECONFIG), or the in-cluster service account."""
    configuration = Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG"):
        kube_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        kube_config.load_incluster_config(client_configuration=configuration)
    # Each informer holds a connection for its watch; leave room for reconciles beside them.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
    return ApiClient(configuration)


def run(stop: threading.Event, kubeconfig: str | None = None, **config: Any) -> None:
    """Convenience: build the client and an ``OperatorConfig(**config)``, then run until stop."""
    Operator(api_client_from(kubeconfig), OperatorConfig(**config)).run(stop)
