"""A work queue of object keys with the guarantees a level-triggered reconciler relies on.

- A key waiting in the queue is held once however often it is added (events coalesce).
- A key is never handed to two workers at once: adding a key that is being processed marks it
  dirty, and it is queued again when the worker calls ``done``.
- ``add_after`` keeps at most one pending delay per key, the earliest.
- ``add_rate_limited`` delays by a per-key exponential back-off that ``forget`` resets.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque


class ExponentialBackoff:
    """Per-key delay: ``base * 2**failures``, capped at ``maximum``."""

    def __init__(self, base: float, maximum: float) -> None:
        self.base = base
        self.maximum = maximum
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def next_delay(self, key: str) -> float:
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        return min(self.base * (2.0 ** min(failures, 62)), self.maximum)

    def failures(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)


class WorkQueue:
    def __init__(self, backoff: ExponentialBackoff) -> None:
        self.backoff = backoff
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._due: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        self._shut = False

    def add(self, key: str) -> None:
        with self._cond:
            self._add_locked(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shut:
                return
            due = time.monotonic() + delay
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, key))
            self._cond.notify()

    def add_rate_limited(self, key: str) -> float:
        """Queue ``key`` after its back-off delay; returns the delay."""
        delay = self.backoff.next_delay(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        self.backoff.forget(key)

    def get(self) -> str | None:
        """Block until a key is ready (and mark it processing) or the queue is shut down (None)."""
        with self._cond:
            while True:
                if self._shut:
                    return None
                self._promote_due_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                self._cond.wait(timeout)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def _add_locked(self, key: str) -> None:
        if self._shut or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._cond.notify()

    def _promote_due_locked(self) -> None:
        now = time.monotonic()
        while self._heap and self._heap[0][0] <= now:
            due, _, key = heapq.heappop(self._heap)
            if self._due.get(key) == due:
                del self._due[key]
                self._add_locked(key)
