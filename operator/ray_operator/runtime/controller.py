"""A controller: a work queue of keys drained by worker threads calling one reconciler.

Reconcile is level-triggered: it gets only the key, reads the current state and converges. It
returns a ``Result`` to be called again after a delay. Exceptions are retried per key with
exponential back-off (logged with the key and traceback); a ``Conflict`` from a stale write is
expected under concurrency, so it is logged on one line and retried the same way. Every retry is
also kept as a ``Retry`` record in ``Controller.retries``, for callers that must know about
retries without parsing the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .client import Conflict, describe_error
from .history import History
from .logs import KeyLogger
from .workqueue import ExponentialBackoff, WorkQueue


@dataclass(frozen=True)
class Result:
    requeue_after: float | None = None


RetryReason = Literal["conflict", "error"]


@dataclass(frozen=True)
class Retry:
    """One failed reconcile, put back in the queue after a back-off delay."""

    key: str
    """The reconcile key, ``namespace/name``."""
    delay_seconds: float
    """The back-off delay chosen (it grows with each consecutive failure of the key)."""
    reason: RetryReason
    """``conflict``: a write met a newer resourceVersion (409), expected under concurrency;
    ``error``: any other exception."""
    message: str
    """For a conflict the API server's message, else the exception on one line."""
    monotonic: float
    """``time.monotonic()`` when the retry was scheduled."""


class Reconciler(Protocol):
    """What a controller implementation provides to the runtime."""

    name: str

    def register(self, enqueue: Callable[[str], None]) -> None:
        """Add handlers to the shared informers that enqueue the keys to reconcile."""

    def reconcile(self, key: str, log: KeyLogger) -> Result | None: ...


class Controller:
    """Runs one ``Reconciler``: its work queue, worker threads and retry history.

    ``reconciler`` is the implementation driven (e.g. a ``RayServiceController``), reachable here
    for the records it keeps of its own; ``retries`` holds the last ``HISTORY_LIMIT`` retries.
    """

    def __init__(
        self,
        reconciler: Reconciler,
        *,
        workers: int,
        backoff_base_seconds: float,
        backoff_max_seconds: float,
    ) -> None:
        self.name = reconciler.name
        self.reconciler = reconciler
        self.queue = WorkQueue(ExponentialBackoff(backoff_base_seconds, backoff_max_seconds))
        self.retries: History[Retry] = History()
        self._workers = workers
        self._log = logging.getLogger(f"ray_operator.controllers.{self.name}")

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
            result = self.reconciler.reconcile(key, log)
        except Conflict as exc:
            delay = self.queue.add_rate_limited(key)
            log.info("conflict (%s); retrying in %.2fs", exc.message, delay)
            self._record_retry(key, delay, "conflict", exc.message)
        except Exception as exc:
            delay = self.queue.add_rate_limited(key)
            log.exception("reconcile failed; retrying in %.2fs", delay)
            self._record_retry(key, delay, "error", describe_error(exc))
        else:
            self.queue.forget(key)
            if result is not None and result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)

    def _record_retry(self, key: str, delay: float, reason: RetryReason, message: str) -> None:
        """After the log line (whoever sees the record finds the line too) and before the worker
        calls ``done``, so the record exists before the key can be reconciled again."""
        self.retries.append(Retry(key, delay, reason, message, time.monotonic()))
