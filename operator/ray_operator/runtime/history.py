"""A bounded, thread-safe history of structured records (what a controller did, and why).

Log lines are for humans and their wording may change; a caller that needs to know what happened
(a test counting retries, a benchmark timing them) reads records instead. Reconcile threads
append; any thread reads a snapshot. Only the newest ``limit`` are kept, so a long-running
operator does not grow without bound, but ``total`` counts every record ever appended, so
"how many since" stays exact after old records have been dropped.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

HISTORY_LIMIT = 1000
"""How many records a history keeps by default."""


class History(Generic[T]):
    def __init__(self, limit: int = HISTORY_LIMIT) -> None:
        if limit < 1:
            raise ValueError("a history keeps at least one record")
        self._lock = threading.Lock()
        self._records: deque[T] = deque(maxlen=limit)
        self._total = 0

    def append(self, record: T) -> None:
        with self._lock:
            self._records.append(record)
            self._total += 1

    def snapshot(self) -> list[T]:
        """The records kept, oldest first (a copy: later appends do not change it)."""
        with self._lock:
            return list(self._records)

    @property
    def total(self) -> int:
        """Records appended over the history's life, including those no longer kept."""
        with self._lock:
            return self._total

    def __iter__(self) -> Iterator[T]:
        """Iterates over a snapshot, so appending meanwhile is safe."""
        return iter(self.snapshot())

    def __len__(self) -> int:
        """Records kept now (at most ``limit``); see ``total`` for all ever appended."""
        with self._lock:
            return len(self._records)
