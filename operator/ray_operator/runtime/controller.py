"""A controller: a work queue of keys drained by worker threads calling one reconcile function.

Reconcile is level-triggered: it gets only the key, reads the current state and converges. It
returns a ``Result`` to be called again after a delay. Exceptions are retried per key with
exponential back-off (logged with the key and traceback); a ``Conflict`` from a stale write is
expected under concurrency, so it is logged on one line and retried the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .client import Conflict
from .logs import KeyLogger
from .workqueue import ExponentialBackoff, WorkQueue


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None


Reconcile = Callable[[str, KeyLogger], "Result | None"]


class Reconciler(Protocol):
    """What a controller implementation provides to the runtime."""

    name: str

    def register(self, enqueue: Callable[[str], None]) -> None:
        """Add handlers to the shared informers that enqueue the keys to reconcile."""

    def reconcile(self, key: str, log: KeyLogger) -> Result | None: ...


class Controller:
    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        *,
        workers: int,
        backoff_base_seconds: float,
        backoff_max_seconds: float,
    ) -> None:
        self.name = name
        self.queue = WorkQueue(ExponentialBackoff(backoff_base_seconds, backoff_max_seconds))
        self._reconcile = reconcile
        self._workers = workers
        self._log = logging.getLogger(f"ray_operator.controllers.{name}")

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._work, name=f"{self.name}-worker-{i}", daemon=True)
            for i in range(self._workers)
        ]
        for thread in threads:
            thread.start()
        return threads

    def stop(self) -> None:
        self.queue.shutdown()

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: str) -> None:
        log = KeyLogger(self._log, self.name, key)
        try:
            result = self._reconcile(key, log)
        except Conflict as exc:
            delay = self.queue.add_rate_limited(key)
            log.info("conflict (%s); retrying in %.2fs", exc.message, delay)
        except Exception:
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile failed; retrying in %.2fs", delay)
        else:
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
